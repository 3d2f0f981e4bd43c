"""What a study asks for: the schema and its defaults, composing configs, experiments, the
plan of jobs and every file name."""
