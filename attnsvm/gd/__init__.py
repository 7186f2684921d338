"""Gradient descent on one attention layer: data, model, training, regularization path."""
