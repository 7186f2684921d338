"""Next-token prediction with self-attention (docs/science.md §8): data, token-priority
graphs and their SCCs, the NTP-SVM, W_fin, batched training and one cell's metrics."""
