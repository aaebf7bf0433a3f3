//! The Qwen2 decoder, written from the architecture (as llama.cpp's `qwen2` graph computes it):
//!
//! ```text
//! x = token_embd[tokens]
//! per layer:  h = rms_norm(x) * attn_norm
//!             q, k, v = h·Wqᵀ + bq, h·Wkᵀ + bk, h·Wvᵀ + bv
//!             q, k = rope_neox(q, pos), rope_neox(k, pos)          (base qwen2.rope.freq_base)
//!             a = softmax(q·kᵀ / √head_dim, causal) · v           (grouped-query: head h reads
//!                                                                  kv head h / (heads / kv_heads))
//!             x = x + a·Woᵀ
//!             h = rms_norm(x) * ffn_norm
//!             x = x + (silu(h·Wgateᵀ) ⊙ h·Wupᵀ)·Wdownᵀ
//! logits = (rms_norm(x) * output_norm)·Woutputᵀ                   (output = token_embd if absent)
//! ```
//!
//! Weights stay in their GGUF quantization; matrix products use candle-core's CPU k-quant
//! kernels (activations quantized to the weight type's dot-product partner, as ggml does) on
//! tiles of prompt rows × chunks of output features, in parallel on a rayon pool. Keys and
//! values are cached per layer, rounded to f16 precision as llama.cpp's default f16 cache
//! stores them; queries are rounded likewise (its CPU flash attention works in f16).

use super::gguf::{get_f32, get_str, get_u32, read_tensor, Metadata, RawTensor};
use crate::error::InferenceError;
use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::{GgmlDType, QuantizedType};
use candle_core::CpuStorage;
use rayon::prelude::*;
use std::borrow::Cow;
use std::io::{Read, Seek};

/// Target bytes of weights per chunk of output features: small enough to stay in a core's L2
/// cache while a tile of prompt rows is multiplied, large enough that re-quantizing the tile's
/// activations for each chunk stays a small overhead. 768 KiB prefilled ~7% faster than 384 KiB
/// on a 1 MiB-per-core L2 (docs/benchmarks.md); 64-row tiles changed nothing.
const CHUNK_BYTES: usize = 768 * 1024;
/// Prompt rows per tile.
const TILE_ROWS: usize = 32;

/// Hyper-parameters from the GGUF metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Decoder layers (`qwen2.block_count`).
    pub n_layer: usize,
    /// Hidden size (`qwen2.embedding_length`).
    pub n_embd: usize,
    /// MLP size (`qwen2.feed_forward_length`).
    pub n_ff: usize,
    /// Query heads (`qwen2.attention.head_count`).
    pub n_head: usize,
    /// Key/value heads (`qwen2.attention.head_count_kv`).
    pub n_kv_head: usize,
    /// Size of one head.
    pub head_dim: usize,
    /// RoPE base (`qwen2.rope.freq_base`).
    pub rope_base: f32,
    /// RMSNorm epsilon (`qwen2.attention.layer_norm_rms_epsilon`).
    pub eps: f32,
    /// Training context (`qwen2.context_length`).
    pub n_ctx_train: usize,
}

impl Config {
    /// Reads and checks the hyper-parameters.
    pub fn from_metadata(metadata: &Metadata) -> Result<Config, InferenceError> {
        let arch = get_str(metadata, "general.architecture")?;
        if arch != "qwen2" {
            return Err(InferenceError::Unsupported(format!(
                "the candle engine runs Qwen2-architecture GGUF models, not {arch:?}; run this model with the llama.cpp engine (cargo feature `llama`)"
            )));
        }
        let n = |key: &str| get_u32(metadata, &format!("qwen2.{key}")).map(|v| v as usize);
        let n_head = n("attention.head_count")?;
        let n_embd = n("embedding_length")?;
        let config = Config {
            n_layer: n("block_count")?,
            n_embd,
            n_ff: n("feed_forward_length")?,
            n_head,
            n_kv_head: n("attention.head_count_kv").unwrap_or(n_head),
            head_dim: n_embd.checked_div(n_head).unwrap_or(0),
            rope_base: get_f32(metadata, "qwen2.rope.freq_base").unwrap_or(10_000.0),
            eps: get_f32(metadata, "qwen2.attention.layer_norm_rms_epsilon").unwrap_or(1e-6),
            n_ctx_train: n("context_length").unwrap_or(32_768),
        };
        if n_head == 0
            || config.n_kv_head == 0
            || n_embd % n_head != 0
            || n_head % config.n_kv_head != 0
            || config.head_dim % 2 != 0
        {
            return Err(InferenceError::Unsupported(format!(
                "unsupported attention shape: {config:?}"
            )));
        }
        if let Ok(rot) = n("rope.dimension_count") {
            if rot != config.head_dim {
                return Err(InferenceError::Unsupported(format!(
                    "partial rotary embeddings ({rot} of {} dimensions) are not supported by the candle engine",
                    config.head_dim
                )));
            }
        }
        if let Ok(scaling) = get_str(metadata, "qwen2.rope.scaling.type") {
            if scaling != "none" {
                return Err(InferenceError::Unsupported(format!(
                    "RoPE scaling {scaling:?} is not supported by the candle engine"
                )));
            }
        }
        Ok(config)
    }

    fn kv_dim(&self) -> usize {
        self.n_kv_head * self.head_dim
    }
}

/// Bytes of a Q5_0 block (f16 scale, 32 high bits, 16 bytes of low nibbles) and of a Q8_0
/// block (f16 scale, 32 signed bytes); both hold 32 values.
const Q5_0_BLOCK: usize = 22;
const Q8_0_BLOCK: usize = 34;

/// Rewrites a Q5_0 matrix as Q8_0, exactly: a Q5_0 value is `d · (q − 16)` with `q` in 0..32,
/// which Q8_0 stores as `d · (q − 16)` with the same `d`. candle-core has SIMD kernels for
/// Q8_0 × Q8_0 but only scalar code for Q5_0 × Q8_0 (the same integer dot products), and most
/// matrices of the default model are Q5_0 (llama.cpp's Q4_K_M falls back to it for rows of 896
/// values): widening costs 55% more memory for those matrices and makes prefill several times
/// faster (docs/benchmarks.md).
fn widen_q5_0(raw: &RawTensor) -> Result<RawTensor, InferenceError> {
    if raw.bytes.len() % Q5_0_BLOCK != 0 {
        return Err(InferenceError::Format(
            "Q5_0 tensor data is not a whole number of blocks".into(),
        ));
    }
    let mut bytes = Vec::with_capacity(raw.bytes.len() / Q5_0_BLOCK * Q8_0_BLOCK);
    for block in raw.bytes.chunks_exact(Q5_0_BLOCK) {
        let (scale, rest) = block.split_at(2);
        let (high, low) = rest.split_at(4);
        let high = u32::from_le_bytes([high[0], high[1], high[2], high[3]]);
        bytes.extend_from_slice(scale);
        // Values 0..16 are the low nibbles, 16..32 the high nibbles; bit j of `high` is the
        // fifth bit of value j.
        for j in 0..32 {
            let nibble = if j < 16 {
                low[j] & 0x0f
            } else {
                low[j - 16] >> 4
            };
            let q = nibble | ((((high >> j) & 1) as u8) << 4);
            bytes.push((i16::from(q) - 16) as i8 as u8);
        }
    }
    Ok(RawTensor {
        dtype: GgmlDType::Q8_0,
        dims: raw.dims.clone(),
        bytes,
    })
}

/// candle reinterprets the bytes as blocks in place (it asserts their alignment); a slice
/// that is not aligned for the block type is copied into a fresh allocation first.
fn block_storage(dtype: GgmlDType, bytes: &[u8]) -> Result<Box<dyn QuantizedType>, InferenceError> {
    let align = match dtype {
        GgmlDType::F32 | GgmlDType::Q8K => 4,
        _ => 2,
    };
    if (bytes.as_ptr() as usize) % align == 0 {
        return Ok(dtype.from_data(Cow::Borrowed(bytes)));
    }
    let copy = bytes.to_vec();
    if (copy.as_ptr() as usize) % align != 0 {
        return Err(InferenceError::Compute("misaligned tensor data".into()));
    }
    Ok(dtype.from_data(Cow::Owned(copy)))
}

fn dequantize(dtype: GgmlDType, bytes: &[u8], elems: usize) -> Result<Vec<f32>, InferenceError> {
    match block_storage(dtype, bytes)?
        .dequantize(elems)
        .map_err(|e| InferenceError::Compute(e.to_string()))?
    {
        CpuStorage::F32(values) => Ok(values),
        _ => Err(InferenceError::Compute(
            "dequantization did not give f32 values".into(),
        )),
    }
}

/// A weight matrix `[out, in]` in chunks of output features, with an optional bias.
pub(crate) struct Linear {
    chunks: Vec<Box<dyn QuantizedType>>,
    chunk_rows: usize,
    n_out: usize,
    n_in: usize,
    bias: Option<Vec<f32>>,
}

impl Linear {
    pub(crate) fn new(raw: &RawTensor, bias: Option<Vec<f32>>) -> Result<Linear, InferenceError> {
        let widened;
        let raw = if raw.dtype == GgmlDType::Q5_0 {
            widened = widen_q5_0(raw)?;
            &widened
        } else {
            raw
        };
        let [n_out, n_in] = raw.dims[..] else {
            return Err(InferenceError::Format(format!(
                "expected a matrix, found dimensions {:?}",
                raw.dims
            )));
        };
        if bias.as_ref().is_some_and(|b| b.len() != n_out) {
            return Err(InferenceError::Format(
                "bias length does not match the matrix".into(),
            ));
        }
        let row_bytes = raw.row_bytes();
        let chunk_rows = (CHUNK_BYTES / row_bytes.max(1)).clamp(16, n_out.max(16));
        let chunks = (0..n_out)
            .step_by(chunk_rows)
            .map(|r0| {
                let r1 = (r0 + chunk_rows).min(n_out);
                block_storage(raw.dtype, &raw.bytes[r0 * row_bytes..r1 * row_bytes])
            })
            .collect::<Result<Vec<_>, InferenceError>>()?;
        Ok(Linear {
            chunks,
            chunk_rows,
            n_out,
            n_in,
            bias,
        })
    }

    /// `x·Wᵀ (+ b)` for `m` rows of `x`.
    #[cfg(test)]
    pub(crate) fn forward(&self, x: &[f32], m: usize) -> Result<Vec<f32>, InferenceError> {
        Ok(forward_many(&[self], x, m)?.remove(0))
    }
}

/// Several products of the same input (q/k/v; gate/up), computed in one parallel pass over
/// all their tiles.
pub(crate) fn forward_many(
    linears: &[&Linear],
    x: &[f32],
    m: usize,
) -> Result<Vec<Vec<f32>>, InferenceError> {
    let n_in = linears.first().map_or(0, |l| l.n_in);
    if linears.iter().any(|l| l.n_in != n_in) || x.len() != m * n_in {
        return Err(InferenceError::Compute(
            "matrix product with mismatched shapes".into(),
        ));
    }
    let tile_rows = m.clamp(1, TILE_ROWS);
    let row_blocks = m.div_ceil(tile_rows);
    // Chunk-major: one worker keeps a chunk of weights hot while it walks the row blocks.
    let tiles: Vec<(usize, usize, usize)> = linears
        .iter()
        .enumerate()
        .flat_map(|(l, linear)| {
            (0..linear.chunks.len()).flat_map(move |c| (0..row_blocks).map(move |b| (l, c, b)))
        })
        .collect();
    let parts = tiles
        .par_iter()
        .map(|&(l, c, b)| {
            let linear = linears[l];
            let r0 = b * tile_rows;
            let rows = tile_rows.min(m - r0);
            let c0 = c * linear.chunk_rows;
            let cols = linear.chunk_rows.min(linear.n_out - c0);
            let mut out = vec![0f32; rows * cols];
            linear.chunks[c]
                .matmul_t(
                    (rows, n_in, cols),
                    &x[r0 * n_in..(r0 + rows) * n_in],
                    &mut out,
                )
                .map_err(|e| InferenceError::Compute(format!("quantized matrix product: {e}")))?;
            Ok(out)
        })
        .collect::<Result<Vec<Vec<f32>>, InferenceError>>()?;
    let mut outputs: Vec<Vec<f32>> = linears.iter().map(|l| vec![0f32; m * l.n_out]).collect();
    for (&(l, c, b), part) in tiles.iter().zip(&parts) {
        let linear = linears[l];
        let n = linear.n_out;
        let c0 = c * linear.chunk_rows;
        let cols = linear.chunk_rows.min(n - c0);
        let r0 = b * tile_rows;
        for (i, row) in part.chunks_exact(cols).enumerate() {
            outputs[l][(r0 + i) * n + c0..][..cols].copy_from_slice(row);
        }
    }
    for (linear, y) in linears.iter().zip(&mut outputs) {
        if let Some(bias) = &linear.bias {
            for row in y.chunks_exact_mut(linear.n_out) {
                for (v, b) in row.iter_mut().zip(bias) {
                    *v += b;
                }
            }
        }
    }
    Ok(outputs)
}

struct Layer {
    attn_norm: Vec<f32>,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    ffn_norm: Vec<f32>,
    gate: Linear,
    up: Linear,
    down: Linear,
}

/// The token embedding, kept quantized; rows are dequantized on lookup.
struct Embedding {
    raw: RawTensor,
    dim: usize,
}

impl Embedding {
    fn row(&self, token: u32) -> Result<Vec<f32>, InferenceError> {
        let rows = self.raw.dims[0];
        let token = token as usize;
        if token >= rows {
            return Err(InferenceError::Input(format!(
                "token {token} is outside the {rows}-token embedding"
            )));
        }
        let rb = self.raw.row_bytes();
        dequantize(
            self.raw.dtype,
            &self.raw.bytes[token * rb..(token + 1) * rb],
            self.dim,
        )
    }
}

/// A Qwen2 model with its KV cache.
pub struct Qwen2 {
    /// Hyper-parameters.
    pub config: Config,
    embedding: Embedding,
    layers: Vec<Layer>,
    norm: Vec<f32>,
    head: Linear,
    /// Per layer: keys and values, `[position][kv_dim]`.
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
    /// Positions held in the cache.
    len: usize,
    n_ctx: usize,
}

/// A KV cache set aside ([`Qwen2::swap_cache`]): per layer keys and values, and the positions
/// it holds.
pub struct KvCache {
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
    len: usize,
}

impl KvCache {
    /// Forgets every position (the memory is kept for reuse).
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl Qwen2 {
    /// Loads the weights of a Qwen2 GGUF (header already read) with room for `n_ctx` positions.
    pub fn load<R: Read + Seek>(
        content: &Content,
        reader: &mut R,
        n_ctx: usize,
    ) -> Result<Qwen2, InferenceError> {
        let config = Config::from_metadata(&content.metadata)?;
        let mut load = Loader { content, reader };
        let (d, kv) = (config.n_embd, config.kv_dim());
        let mut layers = Vec::with_capacity(config.n_layer);
        for i in 0..config.n_layer {
            let p = |name: &str| format!("blk.{i}.{name}");
            let bq = load.optional_vector(&p("attn_q.bias"), d)?;
            let bk = load.optional_vector(&p("attn_k.bias"), kv)?;
            let bv = load.optional_vector(&p("attn_v.bias"), kv)?;
            layers.push(Layer {
                attn_norm: load.vector(&p("attn_norm.weight"), d)?,
                q: load.linear(&p("attn_q.weight"), bq, d, d)?,
                k: load.linear(&p("attn_k.weight"), bk, kv, d)?,
                v: load.linear(&p("attn_v.weight"), bv, kv, d)?,
                o: load.linear(&p("attn_output.weight"), None, d, d)?,
                ffn_norm: load.vector(&p("ffn_norm.weight"), d)?,
                gate: load.linear(&p("ffn_gate.weight"), None, config.n_ff, d)?,
                up: load.linear(&p("ffn_up.weight"), None, config.n_ff, d)?,
                down: load.linear(&p("ffn_down.weight"), None, d, config.n_ff)?,
            });
        }
        let norm = load.vector("output_norm.weight", d)?;
        let embedding = load.raw("token_embd.weight")?;
        if embedding.dims.len() != 2 || embedding.dims[1] != d {
            return Err(InferenceError::Format(format!(
                "token_embd.weight has shape {:?}, expected [vocabulary, {d}]",
                embedding.dims
            )));
        }
        // A separate output matrix, or the embedding tied as the output head.
        let head = if content.tensor_infos.contains_key("output.weight") {
            Linear::new(&load.raw("output.weight")?, None)?
        } else {
            Linear::new(&embedding, None)?
        };
        let n_ctx = n_ctx.max(1);
        Ok(Qwen2 {
            keys: (0..config.n_layer)
                .map(|_| vec![0f32; n_ctx * kv])
                .collect(),
            values: (0..config.n_layer)
                .map(|_| vec![0f32; n_ctx * kv])
                .collect(),
            config,
            embedding: Embedding {
                raw: embedding,
                dim: d,
            },
            layers,
            norm,
            head,
            len: 0,
            n_ctx,
        })
    }

    /// An empty cache of this model's shape (memory is taken as positions are written).
    pub fn new_cache(&self) -> KvCache {
        let size = self.n_ctx * self.config.kv_dim();
        KvCache {
            keys: (0..self.config.n_layer).map(|_| vec![0f32; size]).collect(),
            values: (0..self.config.n_layer).map(|_| vec![0f32; size]).collect(),
            len: 0,
        }
    }

    /// Exchanges the model's cache with `other` (no copy).
    pub fn swap_cache(&mut self, other: &mut KvCache) {
        std::mem::swap(&mut self.keys, &mut other.keys);
        std::mem::swap(&mut self.values, &mut other.values);
        std::mem::swap(&mut self.len, &mut other.len);
    }

    /// Vocabulary size of the output head.
    pub fn vocab_size(&self) -> usize {
        self.head.n_out
    }

    /// Positions in the KV cache.
    pub fn cached(&self) -> usize {
        self.len
    }

    /// Context length the cache holds.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Forgets cached positions from `len` on.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Runs `tokens` at the positions after the cached ones, appending their keys and values,
    /// and returns the logits of the last token. Call inside the thread pool that should run it.
    pub fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>, InferenceError> {
        let m = tokens.len();
        let start = self.len;
        if m == 0 {
            return Err(InferenceError::Input("nothing to compute".into()));
        }
        if start + m > self.n_ctx {
            return Err(InferenceError::Input(format!(
                "{} positions exceed the {}-token context",
                start + m,
                self.n_ctx
            )));
        }
        let c = self.config.clone();
        let (d, kv, hd) = (c.n_embd, c.kv_dim(), c.head_dim);
        let rows = tokens
            .par_iter()
            .map(|&t| self.embedding.row(t))
            .collect::<Result<Vec<Vec<f32>>, InferenceError>>()?;
        let mut x: Vec<f32> = rows.concat();
        let rope = RopeTable::new(start, m, hd, c.rope_base);
        for (li, layer) in self.layers.iter().enumerate() {
            let h = rms_norm(&x, &layer.attn_norm, c.eps);
            let mut qkv = forward_many(&[&layer.q, &layer.k, &layer.v], &h, m)?;
            let v = qkv.pop().unwrap_or_default();
            let mut k = qkv.pop().unwrap_or_default();
            let mut q = qkv.pop().unwrap_or_default();
            rope.apply(&mut q, c.n_head, hd);
            rope.apply(&mut k, c.n_kv_head, hd);
            round_f16(&mut q);
            round_f16(&mut k);
            let mut v = v;
            round_f16(&mut v);
            self.keys[li][start * kv..(start + m) * kv].copy_from_slice(&k);
            self.values[li][start * kv..(start + m) * kv].copy_from_slice(&v);
            let attn = attention(
                &q,
                &self.keys[li][..(start + m) * kv],
                &self.values[li][..(start + m) * kv],
                start,
                &c,
            );
            let o = forward_many(&[&layer.o], &attn, m)?.remove(0);
            add(&mut x, &o);
            let h = rms_norm(&x, &layer.ffn_norm, c.eps);
            let mut gu = forward_many(&[&layer.gate, &layer.up], &h, m)?;
            let up = gu.pop().unwrap_or_default();
            let mut gate = gu.pop().unwrap_or_default();
            gate.par_chunks_mut(4096)
                .zip(up.par_chunks(4096))
                .for_each(|(g, u)| {
                    for (g, u) in g.iter_mut().zip(u) {
                        *g = *g / (1.0 + (-*g).exp()) * u;
                    }
                });
            let down = forward_many(&[&layer.down], &gate, m)?.remove(0);
            add(&mut x, &down);
        }
        self.len = start + m;
        let last = rms_norm(&x[(m - 1) * d..], &self.norm, c.eps);
        Ok(forward_many(&[&self.head], &last, 1)?.remove(0))
    }
}

/// Reads tensors of one GGUF.
struct Loader<'a, R> {
    content: &'a Content,
    reader: &'a mut R,
}

impl<R: Read + Seek> Loader<'_, R> {
    fn raw(&mut self, name: &str) -> Result<RawTensor, InferenceError> {
        read_tensor(self.content, self.reader, name)
    }

    fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, InferenceError> {
        let raw = self.raw(name)?;
        let elems: usize = raw.dims.iter().product();
        if elems != len {
            return Err(InferenceError::Format(format!(
                "tensor {name} has {elems} values, expected {len}"
            )));
        }
        dequantize(raw.dtype, &raw.bytes, elems)
    }

    fn optional_vector(
        &mut self,
        name: &str,
        len: usize,
    ) -> Result<Option<Vec<f32>>, InferenceError> {
        if self.content.tensor_infos.contains_key(name) {
            self.vector(name, len).map(Some)
        } else {
            Ok(None)
        }
    }

    fn linear(
        &mut self,
        name: &str,
        bias: Option<Vec<f32>>,
        out: usize,
        inp: usize,
    ) -> Result<Linear, InferenceError> {
        let raw = self.raw(name)?;
        if raw.dims != [out, inp] {
            return Err(InferenceError::Format(format!(
                "tensor {name} has shape {:?}, expected [{out}, {inp}]",
                raw.dims
            )));
        }
        Linear::new(&raw, bias).map_err(|e| e.context(name))
    }
}

fn add(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

fn round_f16(values: &mut [f32]) {
    for v in values {
        *v = half::f16::from_f32(*v).to_f32();
    }
}

/// RMSNorm of each row (the sum of squares in f64, as ggml accumulates it), times `weight`.
pub(crate) fn rms_norm(x: &[f32], weight: &[f32], eps: f32) -> Vec<f32> {
    let d = weight.len();
    let mut out = vec![0f32; x.len()];
    out.par_chunks_mut(d)
        .zip(x.par_chunks(d))
        .for_each(|(o, row)| {
            let sum: f64 = row.iter().map(|&v| f64::from(v * v)).sum();
            let mean = (sum / d as f64) as f32;
            let scale = 1.0 / (mean + eps).sqrt();
            for ((o, v), w) in o.iter_mut().zip(row).zip(weight) {
                *o = v * scale * w;
            }
        });
    out
}

/// cos/sin of the rotary angles for a run of positions (ggml's recurrence: θ₀ = position,
/// θᵢ₊₁ = θᵢ·base^(−2/head_dim), in f32).
pub(crate) struct RopeTable {
    half: usize,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl RopeTable {
    pub(crate) fn new(start: usize, m: usize, head_dim: usize, base: f32) -> RopeTable {
        let half = head_dim / 2;
        let scale = base.powf(-2.0 / head_dim as f32);
        let mut cos = Vec::with_capacity(m * half);
        let mut sin = Vec::with_capacity(m * half);
        for p in start..start + m {
            let mut theta = p as f32;
            for _ in 0..half {
                cos.push(theta.cos());
                sin.push(theta.sin());
                theta *= scale;
            }
        }
        RopeTable { half, cos, sin }
    }

    /// Rotates each head of each row, NeoX style: dimension i pairs with i + head_dim/2.
    pub(crate) fn apply(&self, x: &mut [f32], heads: usize, head_dim: usize) {
        let half = self.half;
        for (r, row) in x.chunks_exact_mut(heads * head_dim).enumerate() {
            let cos = &self.cos[r * half..(r + 1) * half];
            let sin = &self.sin[r * half..(r + 1) * half];
            for head in row.chunks_exact_mut(head_dim) {
                let (a, b) = head.split_at_mut(half);
                for i in 0..half {
                    let (x0, x1) = (a[i], b[i]);
                    a[i] = x0 * cos[i] - x1 * sin[i];
                    b[i] = x0 * sin[i] + x1 * cos[i];
                }
            }
        }
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Causal grouped-query attention of `m` query rows at positions `start..start + m` over the
/// cached keys and values of positions `0..start + m`.
pub(crate) fn attention(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    start: usize,
    c: &Config,
) -> Vec<f32> {
    let (hd, d, kv) = (c.head_dim, c.n_head * c.head_dim, c.kv_dim());
    let group = c.n_head / c.n_kv_head;
    let m = q.len() / d;
    let scale = 1.0 / (hd as f32).sqrt();
    let heads: Vec<Vec<f32>> = (0..m * c.n_head)
        .into_par_iter()
        .map(|task| {
            let (i, h) = (task / c.n_head, task % c.n_head);
            let g = h / group;
            let qh = &q[i * d + h * hd..][..hd];
            let visible = start + i + 1;
            let mut scores: Vec<f32> = (0..visible)
                .map(|j| dot(qh, &keys[j * kv + g * hd..][..hd]) * scale)
                .collect();
            let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0f32;
            for s in &mut scores {
                *s = (*s - max).exp();
                sum += *s;
            }
            let mut out = vec![0f32; hd];
            for (j, s) in scores.iter().enumerate() {
                let w = s / sum;
                for (o, v) in out.iter_mut().zip(&values[j * kv + g * hd..][..hd]) {
                    *o += w * v;
                }
            }
            out
        })
        .collect();
    let mut out = Vec::with_capacity(m * d);
    for head in heads {
        out.extend_from_slice(&head);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q5_0_widens_to_q8_0_exactly() {
        // Blocks of random bytes with finite f16 scales (the high bit of the exponent cleared).
        let mut rng = fastrand::Rng::with_seed(7);
        let (rows, cols) = (3, 64);
        let mut bytes = Vec::new();
        for _ in 0..rows * cols / 32 {
            let scale = half::f16::from_f32(rng.f32() * 0.1 - 0.05);
            bytes.extend_from_slice(&scale.to_le_bytes());
            bytes.extend((0..20).map(|_| rng.u8(..)));
        }
        let raw = RawTensor {
            dtype: GgmlDType::Q5_0,
            dims: vec![rows, cols],
            bytes,
        };
        let wide = widen_q5_0(&raw).unwrap();
        assert_eq!(wide.dtype, GgmlDType::Q8_0);
        assert_eq!(wide.bytes.len(), rows * cols / 32 * 34);
        let a = dequantize(GgmlDType::Q5_0, &raw.bytes, rows * cols).unwrap();
        let b = dequantize(GgmlDType::Q8_0, &wide.bytes, rows * cols).unwrap();
        assert_eq!(a, b);
        // The same products: the integer dot products are identical.
        let x: Vec<f32> = (0..2 * cols).map(|_| rng.f32() * 2.0 - 1.0).collect();
        let mut narrow = vec![0f32; 2 * rows];
        block_storage(GgmlDType::Q5_0, &raw.bytes)
            .unwrap()
            .matmul_t((2, cols, rows), &x, &mut narrow)
            .unwrap();
        let widened = Linear::new(&raw, None).unwrap().forward(&x, 2).unwrap();
        for (a, b) in narrow.iter().zip(&widened) {
            assert!((a - b).abs() <= 1e-5 * a.abs().max(1.0), "{a} vs {b}");
        }
        // A truncated tensor is an error, not a panic.
        let cut = RawTensor {
            bytes: raw.bytes[..21].to_vec(),
            ..raw
        };
        assert!(widen_q5_0(&cut).is_err());
    }

    #[test]
    fn rope_rotates_pairs_half_a_head_apart() {
        let table = RopeTable::new(3, 1, 4, 10_000.0);
        let mut x = vec![1.0, 0.0, 0.0, 1.0];
        table.apply(&mut x, 1, 4);
        // Pair (0, 2) rotates by θ = 3, pair (1, 3) by θ = 3·10000^(−1/2).
        let t1 = 3.0f32 * 10_000f32.powf(-0.5);
        assert!((x[0] - 3f32.cos()).abs() < 1e-6 && (x[2] - 3f32.sin()).abs() < 1e-6);
        assert!((x[1] + t1.sin()).abs() < 1e-6 && (x[3] - t1.cos()).abs() < 1e-6);
        // Position 0 is the identity.
        let table = RopeTable::new(0, 1, 4, 10_000.0);
        let mut y = vec![0.3, -0.2, 0.5, 0.7];
        table.apply(&mut y, 1, 4);
        assert_eq!(y, [0.3, -0.2, 0.5, 0.7]);
    }

    #[test]
    fn rms_norm_scales_rows_to_unit_rms() {
        let out = rms_norm(&[3.0, 4.0, 0.0, 0.0], &[1.0, 2.0], 0.0);
        let rms = (12.5f32).sqrt();
        assert!((out[0] - 3.0 / rms).abs() < 1e-6 && (out[1] - 8.0 / rms).abs() < 1e-6);
        assert!(out[2].abs() < 1e-6 || out[2].is_nan());
    }

    #[test]
    fn attention_is_causal_and_grouped() {
        let c = Config {
            n_layer: 1,
            n_embd: 4,
            n_ff: 4,
            n_head: 2,
            n_kv_head: 1,
            head_dim: 2,
            rope_base: 10_000.0,
            eps: 1e-6,
            n_ctx_train: 8,
        };
        // Two positions; values are distinct so the weights can be read off the output.
        let keys = [1.0, 0.0, 0.0, 1.0];
        let values = [10.0, 0.0, 0.0, 10.0];
        let q = [5.0, 0.0, 0.0, 5.0, 5.0, 0.0, 0.0, 5.0];
        let out = attention(&q, &keys, &values, 0, &c);
        // Row 0 sees only position 0, for both heads (they share the kv head).
        assert_eq!(&out[..4], &[10.0, 0.0, 10.0, 0.0]);
        // Row 1, head 0 prefers key 0; head 1 prefers key 1.
        let w = 1.0 / (1.0 + (-5.0f32 / 2f32.sqrt()).exp());
        assert!((out[4] - 10.0 * w).abs() < 1e-4, "{out:?}");
        assert!((out[7] - 10.0 * w).abs() < 1e-4, "{out:?}");
    }
}
