"""Table 1 of the paper measured: complexity per layer, sequential operations and maximum path
length of self-attention, recurrent, convolutional and restricted self-attention layers."""
