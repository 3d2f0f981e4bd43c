"""Stages train and average: the DeepSpeed engine, token-budget batches, the step, the
schedule, checkpoints and the run folder."""
