"""The Vision Transformer: patches, the patch embedding as a convolution, shapes and errors."""

import pytest
import torch
from torch import nn

from tfm.vision import VisionTransformer, patchify


def patches_by_loops(images, p):
    out = []
    for image in images:
        rows = [image[:, t : t + p, l : l + p].reshape(-1) for t in range(0, image.shape[1], p)
                for l in range(0, image.shape[2], p)]
        out.append(torch.stack(rows))
    return torch.stack(out)


@pytest.mark.parametrize("channels,size,p", [(1, 8, 2), (3, 8, 4), (2, 6, 3)])
def test_patchify_matches_loops(channels, size, p):
    images = torch.randn(3, channels, size, size)
    assert torch.equal(patchify(images, p), patches_by_loops(images, p))


def test_patch_embedding_equals_strided_convolution():
    torch.manual_seed(0)
    linear, conv = nn.Linear(3 * 4 * 4, 32), nn.Conv2d(3, 32, kernel_size=4, stride=4)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.view(32, 3, 4, 4))
        conv.bias.copy_(linear.bias)
    images = torch.randn(2, 3, 8, 8)
    by_conv = conv(images).flatten(2).transpose(1, 2)
    assert (linear(patchify(images, 4)) - by_conv).abs().max() < 1e-5


def test_vit_shapes_and_weights():
    model = VisionTransformer(8, 2, 10, d_model=32, n_heads=4, n_layers=2, d_ff=64).eval()
    logits, weights = model(torch.randn(5, 1, 8, 8), need_weights=True)
    assert logits.shape == (5, 10)
    assert len(weights) == 2 and weights[0].shape == (5, 4, 17, 17)
    assert torch.allclose(weights[0].sum(-1), torch.ones(5, 4, 17))


def test_vit_errors_name_the_sizes():
    with pytest.raises(ValueError, match="not divisible by patch=3"):
        VisionTransformer(8, 3, 10)
    model = VisionTransformer(8, 2, 10, d_model=32, n_heads=4, n_layers=1, d_ff=64)
    with pytest.raises(ValueError, match=r"\(B, 1, 8, 8\), got \(2, 1, 7, 7\)"):
        model(torch.randn(2, 1, 7, 7))
    with pytest.raises(ValueError, match="not divisible by the patch size 4"):
        patchify(torch.randn(1, 1, 6, 6), 4)
