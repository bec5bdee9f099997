"""The denoising UNet of a latent-diffusion pipeline (diffusers `UNet2DConditionModel`) as
an op table: one row per kernel eager PyTorch launches for one forward, in launch order.

Convolutions are rows of family `gemm` (op `conv3x3`, `conv1x1`, ...): cuDNN runs fp16/bf16
convolutions as implicit GEMMs on the tensor cores (b=1, m=N·P·Q output pixels, n=C_out,
k=C_in·R·S), and the calibrated `conv` family was fitted on fp32 ResNet runs only. The bytes
are the real tensors' (input image, not its im2col). Every `gemm` row is a weight layer, so
Σ n·k·count over them is the network's matmul/conv weight count (biases and norm affines, a
0.1% remainder, are left out). A Transformer2D's `L` identical BasicTransformerBlocks are one
run of rows with count L (perfcast.compose.kernel_sequence replays them L times).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from perfcast.errors import InputError
from perfcast.ops._table import OpRows
from perfcast.specs import DType, bytes_per_element

__all__ = ["Builder", "conv_math", "unet_ops", "weight_params"]

_NORM_FLOPS = 4.0  # mean, variance, normalise, affine (the transformer tables' convention)
_ACT_FLOPS = 8.0  # every activation counts 8 per element (ops/_cnn.py, ops/_transformer.py)


@dataclass
class Builder:
    """Rows of one network in launch order; `conv_dtype` is the GEMM math of convolutions
    (tf32 for fp32 networks: PyTorch lets cuDNN use TF32 by default, matmuls it does not)."""

    batch: int
    dtype: DType
    conv_dtype: DType
    rows: OpRows = field(default_factory=OpRows)

    @property
    def e(self) -> float:
        return bytes_per_element(self.dtype)

    def gemm(self, layer: str, op: str, tokens: float, n: float, k: float, count: int = 1,
             in_elems: float | None = None, dtype: DType | None = None) -> None:
        """Y[tokens, n] = X W, W of n·k weights; `in_elems` when X is not tokens x k."""
        x = tokens * k if in_elems is None else in_elems
        self.rows.add(layer, op, "gemm", "forward", m=tokens, n=n, k=k,
                      flops=2.0 * tokens * n * k, bytes_read=self.e * (x + n * k),
                      bytes_written=self.e * tokens * n, dtype=(dtype or self.dtype).value,
                      count=count)

    def conv(self, layer: str, c_in: int, c_out: int, size: tuple[int, int], kernel: int = 3,
             stride: int = 1, count: int = 1) -> tuple[int, int]:
        """A padded conv2d on [batch, c_in, *size] as an implicit GEMM; returns the output size."""
        h, w = (-(-s // stride) for s in size)  # padding kernel // 2: ceil(size / stride)
        op = f"conv{kernel}x{kernel}" + (f"_s{stride}" if stride > 1 else "")
        self.gemm(layer, op, self.batch * h * w, c_out, c_in * kernel * kernel, count,
                  in_elems=self.batch * c_in * size[0] * size[1], dtype=self.conv_dtype)
        return h, w

    def vector(self, layer: str, op: str, family: str, rows: float, width: float,
               reads: float = 1, writes: float = 1, count: int = 1,
               flops_per_elem: float = 1.0) -> None:
        elems = rows * width
        self.rows.add(layer, op, family, "forward", m=rows, n=width,
                      flops=flops_per_elem * elems, bytes_read=reads * elems * self.e,
                      bytes_written=writes * elems * self.e, dtype=self.dtype.value, count=count)

    def group_norm(self, layer: str, channels: int, pixels: int, groups: int,
                   count: int = 1) -> None:
        """GroupNorm: one reduction row per (image, group) of channels/groups x pixels."""
        self.vector(layer, "group_norm", "norm", self.batch * groups,
                    channels // groups * pixels, count=count, flops_per_elem=_NORM_FLOPS)

    def silu(self, layer: str, rows: float, width: float, count: int = 1) -> None:
        self.vector(layer, "silu", "activation", rows, width, count=count,
                    flops_per_elem=_ACT_FLOPS)

    def attention(self, layer: str, op: str, queries: int, keys: int, heads: int,
                  head_dim: int, count: int = 1, causal: bool = False,
                  dtype: DType | None = None) -> None:
        """Fused SDPA over `batch` sequences (the shape convention of ops/_table.py)."""
        b = self.batch
        pairs = queries * (queries + 1) / 2 if causal else float(queries * keys)
        self.rows.add(layer, op, "attn_prefill", "forward", b=b * heads, m=queries, n=keys,
                      k=head_dim, flops=2.0 * b * heads * 2 * head_dim * pairs,
                      bytes_read=self.e * b * heads * head_dim * (queries + 2 * keys),
                      bytes_written=self.e * b * heads * head_dim * queries,
                      dtype=(dtype or self.dtype).value, count=count)

    def upsample(self, layer: str, c: int, size: tuple[int, int]) -> tuple[int, int]:
        """Nearest 2x upsampling then a 3x3 conv (diffusers `Upsample2D`): the new size."""
        size = (size[0] * 2, size[1] * 2)
        self.vector(layer, "nearest_2x", "elementwise", self.batch * c, size[0] * size[1],
                    reads=0.25)
        self.conv(layer, c, c, size)
        return size

    def conv_out(self, c: int, c_out: int, size: tuple[int, int], groups: int,
                 kernel: int = 3) -> None:
        """The output head of a UNet or VAE decoder: GroupNorm, SiLU, conv to `c_out`."""
        pixels = size[0] * size[1]
        self.group_norm("conv_out", c, pixels, groups)
        self.silu("conv_out", self.batch * c, pixels)
        self.conv("conv_out", c, c_out, size, kernel)

    def resnet(self, layer: str, c_in: int, c_out: int, size: tuple[int, int], groups: int,
               temb: int | None) -> None:
        """diffusers ResnetBlock2D: GN-SiLU-conv, [+ time projection], GN-SiLU-conv,
        [1x1 shortcut when widths differ], residual add."""
        pixels, b = size[0] * size[1], self.batch
        self.group_norm(layer, c_in, pixels, groups)
        self.silu(layer, b * c_in, pixels)
        self.conv(layer, c_in, c_out, size)
        if temb:
            self.silu(layer, b, temb)
            self.gemm(layer, "time_emb_proj", b, c_out, temb)
            self.vector(layer, "add_temb", "elementwise", b * c_out, pixels)
        self.group_norm(layer, c_out, pixels, groups)
        self.silu(layer, b * c_out, pixels)
        self.conv(layer, c_out, c_out, size)
        if c_in != c_out:
            self.conv(layer, c_in, c_out, size, kernel=1)
        self.vector(layer, "residual_add", "elementwise", b * c_out, pixels, reads=2)

    def frame(self) -> pd.DataFrame:
        return self.rows.frame()


def _transformer2d(bld: Builder, layer: str, c: int, heads: int, layers: int,
                   size: tuple[int, int], groups: int, text_tokens: int, text_dim: int) -> None:
    """diffusers Transformer2DModel (linear projections): GN, to tokens, proj_in, `layers`
    x BasicTransformerBlock (self-attention, cross-attention to the text, GEGLU 4x FFN),
    proj_out, back to channels, residual add."""
    hw, b = size[0] * size[1], bld.batch
    t, d = b * hw, c // heads
    bld.group_norm(layer, c, hw, groups)
    bld.vector(layer, "to_tokens", "elementwise", t, c)  # permute + reshape copies
    bld.gemm(layer, "proj_in", t, c, c)
    blk = f"{layer}.block"
    for i, (name, keys, k_in, kv_tokens) in enumerate((("attn1", hw, c, t),
                                                       ("attn2", text_tokens, text_dim,
                                                        b * text_tokens))):
        bld.vector(blk, f"norm{i + 1}", "norm", t, c, count=layers, flops_per_elem=_NORM_FLOPS)
        bld.gemm(blk, f"{name}.to_q", t, c, c, layers)
        bld.gemm(blk, f"{name}.to_k", kv_tokens, c, k_in, layers)
        bld.gemm(blk, f"{name}.to_v", kv_tokens, c, k_in, layers)
        bld.attention(blk, name, hw, keys, heads, d, count=layers)
        bld.gemm(blk, f"{name}.to_out", t, c, c, layers)
        bld.vector(blk, f"{name}.residual_add", "elementwise", t, c, reads=2, count=layers)
    bld.vector(blk, "norm3", "norm", t, c, count=layers, flops_per_elem=_NORM_FLOPS)
    bld.gemm(blk, "ff.geglu_proj", t, 8 * c, c, layers)  # GEGLU: value and gate, 4c each
    bld.vector(blk, "ff.geglu", "activation", t, 4 * c, reads=2, count=layers,
               flops_per_elem=_ACT_FLOPS)
    bld.gemm(blk, "ff.out", t, c, 4 * c, layers)
    bld.vector(blk, "ff.residual_add", "elementwise", t, c, reads=2, count=layers)
    bld.gemm(layer, "proj_out", t, c, c)
    bld.vector(layer, "to_channels", "elementwise", t, c)
    bld.vector(layer, "residual_add", "elementwise", t, c, reads=2)


def _embeddings(bld: Builder, unet) -> None:
    """Timestep embedding (sinusoid, linear-SiLU-linear) and SDXL's `text_time` added
    embedding (pooled text + six sinusoid-embedded size/crop ids, linear-SiLU-linear)."""
    b, c0, temb = bld.batch, unet.block_out_channels[0], unet.time_embed_dim
    bld.vector("time_embed", "sinusoid", "elementwise", b, c0, reads=0)
    bld.gemm("time_embed", "linear_1", b, temb, c0)
    bld.silu("time_embed", b, temb)
    bld.gemm("time_embed", "linear_2", b, temb, temb)
    if unet.addition_embed_type == "text_time":
        ids = 6 * unet.addition_time_embed_dim  # original size, crop, target size: 2 each
        width = unet.projection_class_embeddings_input_dim  # pooled text + the ids' sinusoids
        bld.vector("add_embed", "sinusoid", "elementwise", b, ids, reads=0)
        bld.vector("add_embed", "concat", "elementwise", b, width)
        bld.gemm("add_embed", "linear_1", b, temb, width)
        bld.silu("add_embed", b, temb)
        bld.gemm("add_embed", "linear_2", b, temb, temb)
        bld.vector("add_embed", "add", "elementwise", b, temb, reads=2)


def conv_math(dtype: DType, tf32: bool = True) -> DType:
    """GEMM math of a convolution: TF32 for fp32 tensors (PyTorch's default
    cudnn.allow_tf32) where the device has TF32 units (`tf32`), else the tensors' dtype."""
    return DType.TF32 if dtype == DType.FP32 and tf32 else dtype


def unet_ops(unet, batch: int, latent_size: tuple[int, int], dtype: DType | str = "fp16",
             text_tokens: int = 77, tf32: bool = True) -> pd.DataFrame:
    """The op table (perfcast.ops.COLUMNS) of one UNet forward on `batch` latents of
    `latent_size` = (h, w), conditioned on `text_tokens` text embeddings. `unet` is a
    perfcast.specs UNetConfig; `batch` counts classifier-free guidance's copies; `tf32`
    whether fp32 convolutions may use TF32 (see conv_math)."""
    dtype = DType(dtype)
    h, w = (int(s) for s in latent_size)
    step = 2 ** unet.downsamples
    if h % step or w % step or h < step or w < step:
        raise InputError("latent_size", f"{h}x{w} does not divide by 2^{unet.downsamples}",
                         f"multiples of {step}")
    bld = Builder(int(batch), dtype, conv_math(dtype, tf32))
    g, temb, chans = unet.norm_num_groups, unet.time_embed_dim, unet.block_out_channels
    heads, depth, ctx = unet.heads(), unet.transformer_layers(), unet.cross_attention_dim
    _embeddings(bld, unet)
    size = bld.conv("conv_in", unet.in_channels, chans[0], (h, w), unet.conv_in_kernel)
    skips, c = [chans[0]], chans[0]
    for lvl, kind in enumerate(unet.down_block_types):
        for j in range(unet.layers_per_block):
            bld.resnet(f"down{lvl}.resnet{j}", c, chans[lvl], size, g, temb)
            c = chans[lvl]
            if kind.startswith("CrossAttn"):
                _transformer2d(bld, f"down{lvl}.attn{j}", c, heads[lvl], depth[lvl], size, g,
                               text_tokens, ctx)
            skips.append(c)
        if lvl < unet.downsamples:
            size = bld.conv(f"down{lvl}.downsample", c, c, size, stride=2)
            skips.append(c)
    bld.resnet("mid.resnet0", c, c, size, g, temb)
    _transformer2d(bld, "mid.attn", c, heads[-1], depth[-1], size, g, text_tokens, ctx)
    bld.resnet("mid.resnet1", c, c, size, g, temb)
    rev = list(reversed(chans))
    for lvl, kind in enumerate(unet.up_block_types):
        src = len(chans) - 1 - lvl
        for j in range(unet.layers_per_block + 1):
            skip = skips.pop()
            bld.vector(f"up{lvl}.resnet{j}", "skip_concat", "elementwise",
                       bld.batch * (c + skip), size[0] * size[1])
            bld.resnet(f"up{lvl}.resnet{j}", c + skip, rev[lvl], size, g, temb)
            c = rev[lvl]
            if kind.startswith("CrossAttn"):
                _transformer2d(bld, f"up{lvl}.attn{j}", c, heads[src], depth[src], size, g,
                               text_tokens, ctx)
        if lvl < unet.downsamples:
            size = bld.upsample(f"up{lvl}.upsample", c, size)
    bld.conv_out(c, unet.out_channels, size, g, unet.conv_out_kernel)
    return bld.frame()


def weight_params(ops: pd.DataFrame) -> float:
    """Matmul and conv weights of an op table built here: Σ n·k·count over `gemm` rows
    (every one a weight layer; biases and norm affines excluded)."""
    gemm = ops[ops["family"] == "gemm"]
    return float((gemm["n"] * gemm["k"] * gemm["count"]).sum())
