//! GGUF access on top of candle-core's reader: typed metadata, and tensors as raw bytes in their
//! stored quantization (turned into candle's CPU block storage by [`super::qwen2`]).

use crate::error::InferenceError;
use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::GgmlDType;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};

pub(crate) type Metadata = HashMap<String, Value>;

/// A metadata value's type (or range) is not what the key needs.
fn wrong_type(key: &str, e: impl std::fmt::Display) -> InferenceError {
    InferenceError::Format(format!("{key}: {e}"))
}

pub(crate) fn get<'m>(metadata: &'m Metadata, key: &str) -> Result<&'m Value, InferenceError> {
    metadata
        .get(key)
        .ok_or_else(|| InferenceError::Format(format!("the GGUF lacks the metadata key {key}")))
}

pub(crate) fn get_str(metadata: &Metadata, key: &str) -> Result<String, InferenceError> {
    get(metadata, key)?
        .to_string()
        .cloned()
        .map_err(|e| wrong_type(key, e))
}

/// An unsigned integer of any stored width.
pub(crate) fn get_u32(metadata: &Metadata, key: &str) -> Result<u32, InferenceError> {
    let value = get(metadata, key)?;
    let wide = match value {
        Value::U8(v) => u64::from(*v),
        Value::U16(v) => u64::from(*v),
        Value::U32(v) => u64::from(*v),
        Value::U64(v) => *v,
        Value::I8(v) => u64::try_from(*v).map_err(|e| wrong_type(key, e))?,
        Value::I16(v) => u64::try_from(*v).map_err(|e| wrong_type(key, e))?,
        Value::I32(v) => u64::try_from(*v).map_err(|e| wrong_type(key, e))?,
        Value::I64(v) => u64::try_from(*v).map_err(|e| wrong_type(key, e))?,
        other => {
            return Err(wrong_type(
                key,
                format!("expected an integer, found {other:?}"),
            ))
        }
    };
    u32::try_from(wide).map_err(|e| wrong_type(key, e))
}

pub(crate) fn get_f32(metadata: &Metadata, key: &str) -> Result<f32, InferenceError> {
    match get(metadata, key)? {
        Value::F32(v) => Ok(*v),
        Value::F64(v) => Ok(*v as f32),
        _ => get_u32(metadata, key).map(|v| v as f32),
    }
}

pub(crate) fn strings(metadata: &Metadata, key: &str) -> Result<Vec<String>, InferenceError> {
    get(metadata, key)?
        .to_vec()
        .map_err(|e| wrong_type(key, e))?
        .iter()
        .map(|v| v.to_string().cloned().map_err(|e| wrong_type(key, e)))
        .collect()
}

/// One tensor's stored bytes.
pub(crate) struct RawTensor {
    pub(crate) dtype: GgmlDType,
    /// Dimensions, outermost first (`[rows, columns]` for a matrix: rows are output features).
    pub(crate) dims: Vec<usize>,
    pub(crate) bytes: Vec<u8>,
}

impl RawTensor {
    /// Bytes per row (the innermost dimension).
    pub(crate) fn row_bytes(&self) -> usize {
        let cols = self.dims.last().copied().unwrap_or(1);
        cols / self.dtype.block_size() * self.dtype.type_size()
    }
}

/// Reads a tensor's bytes.
pub(crate) fn read_tensor<R: Read + Seek>(
    content: &Content,
    reader: &mut R,
    name: &str,
) -> Result<RawTensor, InferenceError> {
    let info = content
        .tensor_infos
        .get(name)
        .ok_or_else(|| InferenceError::Format(format!("the GGUF has no tensor {name}")))?;
    let dims = info.shape.dims().to_vec();
    let elems: usize = dims.iter().product();
    let block = info.ggml_dtype.block_size();
    let cols = dims.last().copied().unwrap_or(1);
    if cols % block != 0 {
        return Err(InferenceError::Format(format!(
            "tensor {name}: rows of {cols} values do not split into {:?} blocks of {block}",
            info.ggml_dtype
        )));
    }
    let size = elems / block * info.ggml_dtype.type_size();
    let mut bytes = vec![0u8; size];
    reader
        .seek(SeekFrom::Start(content.tensor_data_offset + info.offset))
        .and_then(|_| reader.read_exact(&mut bytes))
        .map_err(|e| InferenceError::Io(format!("cannot read tensor {name}: {e}")))?;
    Ok(RawTensor {
        dtype: info.ggml_dtype,
        dims,
        bytes,
    })
}
