"""Tables and figures for results/: the paper's numbers beside ours, always labelled as such."""
