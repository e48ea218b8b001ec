"""Executor-side work on file groups and slices, in Arrow: merging a batch into a base file, appending log blocks,
decoding and reducing logs, compacting and clustering slices. Engine-neutral (no Spark): an engine runs these
functions in its tasks and hands them a picklable FileIO."""
