"""A Vision Transformer (Dosovitskiy et al., 2021): an image becomes a sequence of patch tokens, a learned class token
is put in front, one learned position embedding per patch index is added, and the encoder's class-token output is
classified."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .model import Encoder


def patchify(images: Tensor, patch: int) -> Tensor:
    """``images (B, C, H, W)`` -> patches ``(B, N, C·patch·patch)`` in row-major grid order, N = (H/patch)(W/patch)."""
    if images.dim() != 4:
        raise ValueError(f"images must have shape (B, C, H, W), got {tuple(images.shape)}")
    B, C, H, W = images.shape
    if H % patch or W % patch:
        raise ValueError(f"image size {H}x{W} is not divisible by the patch size {patch}")
    grid = images.reshape(B, C, H // patch, patch, W // patch, patch)  # (B, C, H/p, p, W/p, p)
    grid = grid.permute(0, 2, 4, 1, 3, 5)  # (B, H/p, W/p, C, p, p)
    return grid.reshape(B, (H // patch) * (W // patch), C * patch * patch)  # (B, N, C·p·p)


class VisionTransformer(nn.Module):
    """Patch embedding + class token + learned 1-D positions (one per patch index; nothing tells them the 2-D grid) +
    pre-LN encoder + linear head on the class token."""

    def __init__(self, image_size: int, patch: int, n_classes: int, channels: int = 1, d_model: int = 64,
                 n_heads: int = 4, n_layers: int = 4, d_ff: int = 128, dropout: float = 0.0):
        super().__init__()
        if image_size % patch:
            raise ValueError(f"image_size={image_size} is not divisible by patch={patch}")
        self.image_size, self.patch, self.channels = image_size, patch, channels
        self.grid = image_size // patch
        self.patch_embed = nn.Linear(channels * patch * patch, d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.positions = nn.Parameter(torch.randn(1, self.grid * self.grid + 1, d_model) * 0.02)  # cls + N patches
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff, dropout, activation="gelu", norm_first=True)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, images: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, list]:
        """``images (B, C, H, W)`` -> class logits ``(B, n_classes)`` (and per-layer attention weights if asked)."""
        expected = (self.channels, self.image_size, self.image_size)
        if images.dim() != 4 or tuple(images.shape[1:]) != expected:
            raise ValueError(f"images must have shape (B, {', '.join(map(str, expected))}), got {tuple(images.shape)}")
        tokens = self.patch_embed(patchify(images, self.patch))  # (B, N, d_model)
        cls = self.cls_token.expand(images.shape[0], -1, -1)  # (B, 1, d_model)
        x = torch.cat([cls, tokens], dim=1) + self.positions  # (B, N + 1, d_model)
        x, weights = self.encoder(x, need_weights=need_weights)
        logits = self.head(x[:, 0])  # (B, n_classes)
        return (logits, weights) if need_weights else logits
