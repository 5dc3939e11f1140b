"""Tiny vision transformer: 16x16 patch embedding, class token, position embedding, one pre-norm encoder layer."""
import torch
import torch.nn as nn

batch_size = 32
image_size = 224
patch_size = 16
embed_dim = 384
num_heads = 6

SMOKE_SIZES = {"batch_size": 2, "image_size": 16, "patch_size": 4, "embed_dim": 16, "num_heads": 2}


class Model(nn.Module):
    def __init__(self, image_size, patch_size, embed_dim, num_heads):
        super().__init__()
        num_patches = (image_size // patch_size) ** 2
        self.patch_embed = nn.Conv2d(3, embed_dim, patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.randn(1, 1, embed_dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches + 1, embed_dim) * 0.02)
        self.layer = nn.TransformerEncoderLayer(
            embed_dim, num_heads, dim_feedforward=4 * embed_dim, dropout=0.0,
            activation="gelu", batch_first=True, norm_first=True,
        )
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, images):
        x = self.patch_embed(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        return self.norm(self.layer(x))


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [image_size, patch_size, embed_dim, num_heads]
