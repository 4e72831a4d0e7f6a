"""simplegrad.nn: modules and losses built only on simplegrad's public primitives."""

from .layers import (
           MLP,
           BatchNorm1d,
           Conv2d,
           Dropout,
           Embedding,
           Identity,
           LayerNorm,
           LeakyReLU,
           Linear,
           ReLU,
           Sequential,
           Sigmoid,
           Softplus,
           Tanh,
)
from .losses import cross_entropy, mse, nll
from .module import Module, functional_call, ops_of, value_of
from .pooling import avg_pool2d, max_pool2d

__all__ = ["Module", "functional_call", "ops_of", "value_of", "Linear", "Sequential", "MLP",
           "Embedding", "BatchNorm1d", "LayerNorm", "Dropout", "ReLU", "Tanh", "Sigmoid",
           "LeakyReLU", "Softplus", "Identity", "cross_entropy", "nll", "mse", "Conv2d",
           "max_pool2d", "avg_pool2d"]
