//! Why an in-process engine could not load a GGUF model or compute with it.
//!
//! [`InferenceError`] is what the engines' own functions return (the candle engine's GGUF
//! reader, Qwen2 forward pass, tokenizer and chat template; the llama.cpp engine's loading and
//! prompt rendering). At the engine boundary ([`crate::local`]) it becomes an
//! [`EngineError`](crate::local::EngineError) carrying the same text. Each variant displays
//! exactly its message: the variant says what kind of failure it is, the message what failed.
//!
//! (Named apart from [`crate::model::ModelError`], which is about obtaining and verifying the
//! model file, not about running it.)

/// Why a model could not be loaded or run, by kind; displays as its message alone.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum InferenceError {
    /// The operating system refused: the model file cannot be opened or read, or the engine's
    /// threads cannot be started.
    #[error("{0}")]
    Io(String),
    /// The GGUF does not hold what the architecture needs: its header does not read, it lacks
    /// a metadata key or tensor, or holds one with another type, shape or size.
    #[error("{0}")]
    Format(String),
    /// Something this engine does not compute: an architecture, attention shape, rotary
    /// embedding variant, tokenizer or pre-tokenizer, or chat template it does not implement.
    #[error("{0}")]
    Unsupported(String),
    /// The vocabulary or chat template cannot be used: an empty vocabulary, a pre-tokenizer
    /// that does not build, an output head smaller than the vocabulary, a chat template that
    /// cannot be applied.
    #[error("{0}")]
    Vocabulary(String),
    /// A tensor operation failed while running (a quantized kernel, dequantization, tensor
    /// data the kernels cannot use, operands of mismatched shapes).
    #[error("{0}")]
    Compute(String),
    /// The input cannot be computed: no tokens, a token outside the embedding, more positions
    /// than the context holds, a prompt the engine cannot pass on (a NUL byte).
    #[error("{0}")]
    Input(String),
    /// llama.cpp refused (starting its backend, loading a model or its vocabulary, creating a
    /// context); its errors do not say which of the kinds above it was.
    #[error("{0}")]
    Backend(String),
}

impl InferenceError {
    /// The message (what [`Display`](std::fmt::Display) writes).
    pub fn message(&self) -> &str {
        match self {
            InferenceError::Io(m)
            | InferenceError::Format(m)
            | InferenceError::Unsupported(m)
            | InferenceError::Vocabulary(m)
            | InferenceError::Compute(m)
            | InferenceError::Input(m)
            | InferenceError::Backend(m) => m,
        }
    }

    /// The same kind of error with `what` in front of its message (`"{what}: {message}"`),
    /// as a caller names the tensor or file the error came from.
    pub fn context(self, what: impl std::fmt::Display) -> InferenceError {
        let wrap = |m: String| format!("{what}: {m}");
        match self {
            InferenceError::Io(m) => InferenceError::Io(wrap(m)),
            InferenceError::Format(m) => InferenceError::Format(wrap(m)),
            InferenceError::Unsupported(m) => InferenceError::Unsupported(wrap(m)),
            InferenceError::Vocabulary(m) => InferenceError::Vocabulary(wrap(m)),
            InferenceError::Compute(m) => InferenceError::Compute(wrap(m)),
            InferenceError::Input(m) => InferenceError::Input(wrap(m)),
            InferenceError::Backend(m) => InferenceError::Backend(wrap(m)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_the_message_alone_and_context_keeps_the_kind() {
        let e = InferenceError::Format("the GGUF has no tensor x".into());
        assert_eq!(e.to_string(), "the GGUF has no tensor x");
        assert_eq!(e.message(), "the GGUF has no tensor x");
        let e = InferenceError::Compute("misaligned tensor data".into()).context("blk.0.q");
        assert_eq!(
            e,
            InferenceError::Compute("blk.0.q: misaligned tensor data".into())
        );
        assert_eq!(e.to_string(), "blk.0.q: misaligned tensor data");
    }
}
