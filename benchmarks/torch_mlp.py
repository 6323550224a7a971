"""The MLP both PyTorch comparison scripts build: ddp_train's --model mlp."""
import torch.nn as nn


def build_mlp(hidden):
    """784 -> hidden (comma-separated widths, ReLU between) -> 10, as nn.Sequential."""
    widths = [784] + [int(w) for w in hidden.split(",")] + [10]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)
