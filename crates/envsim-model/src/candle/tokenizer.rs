//! Byte-level BPE (the GPT-2 family: `tokenizer.ggml.model = "gpt2"`) from a GGUF's metadata,
//! with the Qwen2 pre-tokenizer, written to give exactly llama.cpp's tokens:
//!
//! 1. **Special tokens.** Control, user-defined and unknown tokens (`tokenizer.ggml.token_type`
//!    3, 4, 2) are cut out of the text first, longest first; with `special = false` only
//!    user-defined ones are (llama.cpp's `parse_special`).
//! 2. **Pre-tokenizer.** Each remaining piece is split by the Qwen2 regex
//!    `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`.
//!    The `regex` crate has no lookahead, so the last two alternatives are emulated: where none
//!    of the others matches, a run of whitespace is taken whole at the end of the text, else
//!    all but its last character (which then starts the next piece), and a single one alone.
//! 3. **BPE.** Each piece's bytes are mapped to GPT-2's printable characters (one per byte), and
//!    adjacent symbols are merged by rank (`tokenizer.ggml.merges`, earliest rank first, leftmost
//!    on ties) until no merge applies; symbols are then looked up in the vocabulary (a symbol
//!    that is not a token falls back to its single bytes).
//!
//! Decoding a token gives its bytes: normal tokens through the inverse byte map, user-defined
//! tokens as their text, control tokens as nothing (llama.cpp's `special = false`).

use crate::error::InferenceError;
use regex::Regex;
use std::collections::HashMap;
use std::sync::Mutex;

/// What a token is (`tokenizer.ggml.token_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    /// 1: ordinary text.
    Normal,
    /// 2: the unknown token.
    Unknown,
    /// 3: control (`<|im_start|>`, `<|endoftext|>`).
    Control,
    /// 4: user-defined (`<tool_call>`): matched as a whole, decoded as its text.
    UserDefined,
    /// 5: unused padding entries.
    Unused,
    /// 6: byte tokens (`<0x0A>`; SentencePiece vocabularies).
    Byte,
}

impl TokenKind {
    fn from_gguf(value: i32) -> TokenKind {
        match value {
            2 => TokenKind::Unknown,
            3 => TokenKind::Control,
            4 => TokenKind::UserDefined,
            5 => TokenKind::Unused,
            6 => TokenKind::Byte,
            _ => TokenKind::Normal,
        }
    }
}

/// The tokenizer's inputs as a GGUF stores them.
#[derive(Clone, Debug, Default)]
pub struct VocabSpec {
    /// `tokenizer.ggml.tokens`.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.token_type` (empty: all normal).
    pub token_types: Vec<i32>,
    /// `tokenizer.ggml.merges` (`"left right"`, best first).
    pub merges: Vec<String>,
    /// `tokenizer.ggml.pre`.
    pub pre: String,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos: Option<u32>,
    /// `tokenizer.ggml.eot_token_id`.
    pub eot: Option<u32>,
    /// `tokenizer.ggml.add_bos_token`.
    pub add_bos: bool,
}

/// The Qwen2 pre-tokenizer without its two trailing whitespace alternatives (emulated in code).
const QWEN2_SPLIT: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+";

/// Token texts llama.cpp treats as end of generation besides the EOS/EOT ids.
const END_OF_GENERATION: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "<|end_of_text|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
];

/// A byte-level BPE tokenizer.
pub struct BpeTokenizer {
    /// Text of every token, then of merge results that are not tokens ("virtual" symbols).
    texts: Vec<String>,
    kinds: Vec<TokenKind>,
    vocab_size: usize,
    /// (left, right) → (rank, merged symbol).
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// The symbol of each byte's printable character.
    byte_symbol: [u32; 256],
    /// printable character → byte.
    char_byte: HashMap<char, u8>,
    /// Special tokens to cut out, longest text first.
    specials: Vec<u32>,
    split: Regex,
    bos: Option<u32>,
    add_bos: bool,
    end_of_generation: Vec<u32>,
    /// Pieces already encoded (prompts repeat most words).
    cache: Mutex<HashMap<String, Vec<u32>>>,
}

/// GPT-2's map from bytes to printable characters.
fn byte_chars() -> [char; 256] {
    let mut map = ['\0'; 256];
    let mut extra = 0u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        map[usize::from(b)] = if printable {
            char::from(b)
        } else {
            extra += 1;
            char::from_u32(255 + extra).unwrap_or('\u{FFFD}')
        };
    }
    map
}

impl BpeTokenizer {
    /// Builds the tokenizer; errors name what is unsupported.
    pub fn new(spec: VocabSpec) -> Result<BpeTokenizer, InferenceError> {
        if spec.pre != "qwen2" {
            return Err(InferenceError::Unsupported(format!(
                "the candle engine's tokenizer supports the Qwen2 pre-tokenizer (tokenizer.ggml.pre = \"qwen2\"), not {:?}; run this model with the llama.cpp engine (cargo feature `llama`)",
                spec.pre
            )));
        }
        let vocab_size = spec.tokens.len();
        if vocab_size == 0 {
            return Err(InferenceError::Vocabulary(
                "the GGUF has an empty vocabulary".into(),
            ));
        }
        let kinds: Vec<TokenKind> = (0..vocab_size)
            .map(|i| {
                spec.token_types
                    .get(i)
                    .map_or(TokenKind::Normal, |&t| TokenKind::from_gguf(t))
            })
            .collect();
        let mut texts = spec.tokens;
        let mut ids: HashMap<String, u32> = HashMap::with_capacity(vocab_size);
        for (i, text) in texts.iter().enumerate() {
            // The first of duplicate texts wins, as in llama.cpp's token_to_id map.
            ids.entry(text.clone()).or_insert(i as u32);
        }
        let chars = byte_chars();
        let mut byte_symbol = [u32::MAX; 256];
        let mut char_byte = HashMap::with_capacity(256);
        for (b, c) in chars.iter().enumerate() {
            char_byte.insert(*c, b as u8);
            let text = c.to_string();
            byte_symbol[b] = match ids.get(&text) {
                Some(&id) => id,
                None => {
                    let id = texts.len() as u32;
                    texts.push(text.clone());
                    ids.insert(text, id);
                    id
                }
            };
        }
        let mut merges = HashMap::with_capacity(spec.merges.len());
        for (rank, merge) in spec.merges.iter().enumerate() {
            let Some((left, right)) = merge.split_once(' ') else {
                continue;
            };
            let mut symbol = |text: String, texts: &mut Vec<String>| match ids.get(&text) {
                Some(&id) => id,
                None => {
                    let id = texts.len() as u32;
                    texts.push(text.clone());
                    ids.insert(text, id);
                    id
                }
            };
            let l = symbol(left.to_owned(), &mut texts);
            let r = symbol(right.to_owned(), &mut texts);
            let m = symbol(format!("{left}{right}"), &mut texts);
            merges.entry((l, r)).or_insert((rank as u32, m));
        }
        let mut specials: Vec<u32> = (0..vocab_size as u32)
            .filter(|&i| {
                matches!(
                    kinds[i as usize],
                    TokenKind::Control | TokenKind::UserDefined | TokenKind::Unknown
                ) && !texts[i as usize].is_empty()
            })
            .collect();
        specials.sort_by_key(|&i| std::cmp::Reverse(texts[i as usize].len()));
        let mut end_of_generation: Vec<u32> = spec.eos.into_iter().chain(spec.eot).collect();
        for text in END_OF_GENERATION {
            if let Some(&id) = ids.get(*text) {
                if (id as usize) < vocab_size {
                    end_of_generation.push(id);
                }
            }
        }
        end_of_generation.sort_unstable();
        end_of_generation.dedup();
        let split = Regex::new(QWEN2_SPLIT)
            .map_err(|e| InferenceError::Vocabulary(format!("pre-tokenizer: {e}")))?;
        Ok(BpeTokenizer {
            texts,
            kinds,
            vocab_size,
            merges,
            byte_symbol,
            char_byte,
            specials,
            split,
            bos: spec.bos,
            add_bos: spec.add_bos,
            end_of_generation,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// Reads the tokenizer of a GGUF file (metadata only).
    pub fn from_gguf_file(path: &std::path::Path) -> Result<BpeTokenizer, InferenceError> {
        let mut file = std::fs::File::open(path)
            .map_err(|e| InferenceError::Io(format!("cannot open {}: {e}", path.display())))?;
        let content = candle_core::quantized::gguf_file::Content::read(&mut file).map_err(|e| {
            InferenceError::Format(format!(
                "cannot read the GGUF header of {}: {e}",
                path.display()
            ))
        })?;
        BpeTokenizer::from_metadata(&content.metadata)
    }

    /// Reads the tokenizer from GGUF metadata.
    pub fn from_metadata(
        metadata: &HashMap<String, candle_core::quantized::gguf_file::Value>,
    ) -> Result<BpeTokenizer, InferenceError> {
        use super::gguf::{get_str, get_u32, strings};
        let model = get_str(metadata, "tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(InferenceError::Unsupported(format!(
                "the candle engine's tokenizer supports byte-level BPE vocabularies (tokenizer.ggml.model = \"gpt2\"), not {model:?}; run this model with the llama.cpp engine (cargo feature `llama`)"
            )));
        }
        let token_type = |e: candle_core::Error| {
            InferenceError::Format(format!("tokenizer.ggml.token_type: {e}"))
        };
        let token_types = match metadata.get("tokenizer.ggml.token_type") {
            Some(value) => value
                .to_vec()
                .map_err(token_type)?
                .iter()
                .map(|v| v.to_i32().map_err(token_type))
                .collect::<Result<Vec<i32>, InferenceError>>()?,
            None => Vec::new(),
        };
        BpeTokenizer::new(VocabSpec {
            tokens: strings(metadata, "tokenizer.ggml.tokens")?,
            token_types,
            merges: strings(metadata, "tokenizer.ggml.merges")?,
            pre: get_str(metadata, "tokenizer.ggml.pre").unwrap_or_else(|_| "default".into()),
            bos: get_u32(metadata, "tokenizer.ggml.bos_token_id").ok(),
            eos: get_u32(metadata, "tokenizer.ggml.eos_token_id").ok(),
            eot: get_u32(metadata, "tokenizer.ggml.eot_token_id").ok(),
            add_bos: metadata
                .get("tokenizer.ggml.add_bos_token")
                .and_then(|v| v.to_bool().ok())
                .unwrap_or(false),
        })
    }

    /// Tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// Whether the model wants a BOS token first.
    pub fn add_bos(&self) -> Option<u32> {
        self.bos.filter(|_| self.add_bos)
    }

    /// Whether `token` ends the turn.
    pub fn is_end_of_generation(&self, token: u32) -> bool {
        self.end_of_generation.binary_search(&token).is_ok()
    }

    /// A token's text as stored (byte-level characters for normal tokens).
    pub fn token_text(&self, token: u32) -> Option<&str> {
        ((token as usize) < self.vocab_size).then(|| self.texts[token as usize].as_str())
    }

    /// Token ids of `text`; `special`: control tokens written in the text are recognised.
    pub fn encode(&self, text: &str, special: bool) -> Vec<u32> {
        let mut out = Vec::new();
        for fragment in self.partition(text, special) {
            match fragment {
                Fragment::Token(id) => out.push(id),
                Fragment::Text(text) => self.encode_text(text, &mut out),
            }
        }
        out
    }

    /// The bytes a generated token stands for.
    pub fn decode_token(&self, token: u32) -> Vec<u8> {
        let Some(text) = self.token_text(token) else {
            return Vec::new();
        };
        match self.kinds[token as usize] {
            TokenKind::Normal => self.unmap(text),
            TokenKind::UserDefined => text.as_bytes().to_vec(),
            TokenKind::Byte => parse_byte_token(text).map_or_else(Vec::new, |b| vec![b]),
            TokenKind::Control | TokenKind::Unknown | TokenKind::Unused => Vec::new(),
        }
    }

    /// The bytes of a sequence of generated tokens.
    pub fn decode(&self, tokens: &[u32]) -> Vec<u8> {
        tokens.iter().flat_map(|&t| self.decode_token(t)).collect()
    }

    fn unmap(&self, text: &str) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(text.len());
        for c in text.chars() {
            match self.char_byte.get(&c) {
                Some(&b) => bytes.push(b),
                None => {
                    let mut buf = [0u8; 4];
                    bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        bytes
    }

    fn partition<'t>(&self, text: &'t str, special: bool) -> Vec<Fragment<'t>> {
        let mut fragments = vec![Fragment::Text(text)];
        for &id in &self.specials {
            let kind = self.kinds[id as usize];
            if !special && kind != TokenKind::UserDefined {
                continue;
            }
            let needle = self.texts[id as usize].as_str();
            if !fragments
                .iter()
                .any(|f| matches!(f, Fragment::Text(t) if t.contains(needle)))
            {
                continue;
            }
            let mut next = Vec::with_capacity(fragments.len() + 2);
            for fragment in fragments {
                let Fragment::Text(mut rest) = fragment else {
                    next.push(fragment);
                    continue;
                };
                while let Some(at) = rest.find(needle) {
                    if at > 0 {
                        next.push(Fragment::Text(&rest[..at]));
                    }
                    next.push(Fragment::Token(id));
                    rest = &rest[at + needle.len()..];
                }
                if !rest.is_empty() {
                    next.push(Fragment::Text(rest));
                }
            }
            fragments = next;
        }
        fragments
    }

    fn encode_text(&self, text: &str, out: &mut Vec<u32>) {
        for piece in pre_tokenize(&self.split, text) {
            let cached = self
                .cache
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(piece)
                .cloned();
            let ids = match cached {
                Some(ids) => ids,
                None => {
                    let ids = self.bpe(piece.as_bytes());
                    let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
                    if cache.len() > 200_000 {
                        cache.clear();
                    }
                    cache.insert(piece.to_owned(), ids.clone());
                    ids
                }
            };
            out.extend_from_slice(&ids);
        }
    }

    fn bpe(&self, bytes: &[u8]) -> Vec<u32> {
        let mut symbols: Vec<u32> = bytes
            .iter()
            .map(|&b| self.byte_symbol[usize::from(b)])
            .collect();
        loop {
            let best = symbols
                .windows(2)
                .enumerate()
                .filter_map(|(i, pair)| {
                    self.merges
                        .get(&(pair[0], pair[1]))
                        .map(|&(rank, merged)| (rank, i, merged))
                })
                .min();
            let Some((_, i, merged)) = best else {
                break;
            };
            symbols[i] = merged;
            symbols.remove(i + 1);
        }
        let mut ids = Vec::with_capacity(symbols.len());
        for symbol in symbols {
            if (symbol as usize) < self.vocab_size {
                ids.push(symbol);
            } else {
                // Not a token: its single bytes (those that are tokens).
                for b in self.unmap(&self.texts[symbol as usize]) {
                    let id = self.byte_symbol[usize::from(b)];
                    if (id as usize) < self.vocab_size {
                        ids.push(id);
                    }
                }
            }
        }
        ids
    }
}

enum Fragment<'t> {
    Text(&'t str),
    Token(u32),
}

fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

/// Splits text as the Qwen2 pre-tokenizer does (see the module documentation).
pub fn pre_tokenize<'t>(split: &Regex, text: &'t str) -> Vec<&'t str> {
    let mut pieces = Vec::new();
    let mut pos = 0;
    while pos < text.len() {
        let rest = &text[pos..];
        let first = rest.chars().next().unwrap_or(' ');
        let matched = split
            .find_at(text, pos)
            .filter(|m| m.start() == pos && m.end() > pos);
        let end = match matched {
            Some(m) => m.end(),
            None if first.is_whitespace() => {
                // `\s+(?!\S)|\s+`: a whitespace run, less its last character when more text
                // follows and the run is longer than one character.
                let run: usize = rest
                    .chars()
                    .take_while(|c| c.is_whitespace())
                    .map(char::len_utf8)
                    .sum();
                let at_end = run == rest.len();
                let last = rest[..run].chars().next_back().map_or(0, char::len_utf8);
                if at_end || run == last {
                    pos + run
                } else {
                    pos + run - last
                }
            }
            // Unreachable with this pattern (every other character starts a match); keep the
            // character on its own rather than loop.
            None => pos + first.len_utf8(),
        };
        pieces.push(&text[pos..end]);
        pos = end;
    }
    pieces
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A tiny byte-level vocabulary: every byte character, a few merges, and special tokens.
    pub(crate) fn tiny_vocab() -> VocabSpec {
        let chars = byte_chars();
        let mut tokens: Vec<String> = chars.iter().map(|c| c.to_string()).collect();
        let merges: Vec<String> = [
            "h e",
            "l l",
            "he ll",
            "hell o",
            "Ġ w",
            "o r",
            "l d",
            "Ġw or",
            "Ġwor ld",
            "Ġ Ġ",
            "ĠĠ ĠĠ",
            "Ċ Ċ",
            "' s",
            "1 2",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        for m in &merges {
            tokens.push(m.replace(' ', ""));
        }
        tokens.push("<|im_start|>".into());
        tokens.push("<|im_end|>".into());
        tokens.push("<tool_call>".into());
        tokens.push("<|im".into()); // a normal token that is a prefix of a special one
        let mut token_types = vec![1; tokens.len()];
        let n = tokens.len();
        token_types[n - 4] = 3;
        token_types[n - 3] = 3;
        token_types[n - 2] = 4;
        VocabSpec {
            tokens,
            token_types,
            merges,
            pre: "qwen2".into(),
            bos: None,
            eos: Some((n - 3) as u32),
            eot: None,
            add_bos: false,
        }
    }

    fn id(t: &BpeTokenizer, text: &str) -> u32 {
        (0..t.vocab_size() as u32)
            .find(|&i| t.token_text(i) == Some(text))
            .unwrap_or_else(|| panic!("no token {text:?}"))
    }

    fn split(text: &str) -> Vec<&str> {
        let re = Regex::new(QWEN2_SPLIT).unwrap();
        pre_tokenize(&re, text)
    }

    #[test]
    fn pre_tokenizer_splits_like_the_qwen2_regex() {
        assert_eq!(split("Hello world"), ["Hello", " world"]);
        assert_eq!(
            split("it's 2024!"),
            ["it", "'s", " ", "2", "0", "2", "4", "!"]
        );
        // Whitespace before a word leaves its last space to the word (`\s+(?!\S)`).
        assert_eq!(split("a   b"), ["a", "  ", " b"]);
        assert_eq!(split("a  5"), ["a", " ", " ", "5"]);
        assert_eq!(split("x   "), ["x", "   "]);
        // Newlines: `\s*[\r\n]+` takes spaces up to the last newline of the run.
        assert_eq!(split("a\n\n  b"), ["a", "\n\n", " ", " b"]);
        assert_eq!(
            split("{\n    \"k\": 1}"),
            ["{\n", "   ", " \"", "k", "\":", " ", "1", "}"]
        );
        assert_eq!(split("\tx"), ["\tx"]);
        assert_eq!(split("  .x"), [" ", " .", "x"]);
        assert_eq!(split("Ünïcödé 東京 ½"), ["Ünïcödé", " 東京", " ", "½"]);
        assert_eq!(split("a\u{a0}\u{a0}b"), ["a", "\u{a0}", "\u{a0}b"]);
        assert_eq!(split("x=>y\r\n"), ["x", "=>", "y", "\r\n"]);
        assert_eq!(split("I'M HE'LL"), ["I", "'M", " HE", "'LL"]);
        assert_eq!(split(""), Vec::<&str>::new());
        // Every character ends up in exactly one piece.
        let text = "  mixed\t\ttabs \n\n and 123 numbers!!\n  ";
        assert_eq!(split(text).concat(), text);
    }

    #[test]
    fn bpe_merges_by_rank_and_round_trips() {
        let t = BpeTokenizer::new(tiny_vocab()).unwrap();
        assert_eq!(
            t.encode("hello world", false),
            [id(&t, "hello"), id(&t, "Ġworld")]
        );
        // "12" merges; "123" leaves "3" alone because the pre-tokenizer splits digits first.
        assert_eq!(
            t.encode("123", false),
            [id(&t, "1"), id(&t, "2"), id(&t, "3")]
        );
        for text in [
            "hello world",
            "tabs\tand\nnewlines\n\n",
            "unicode: 東京 ½ é",
            "  leading and trailing  ",
            "{\"a\": [1, 2, {\"b\": null}]}",
            "",
        ] {
            let ids = t.encode(text, true);
            assert_eq!(t.decode(&ids), text.as_bytes(), "{text:?}");
        }
    }

    #[test]
    fn special_tokens_are_cut_out_only_when_asked() {
        let t = BpeTokenizer::new(tiny_vocab()).unwrap();
        let start = id(&t, "<|im_start|>");
        let end = id(&t, "<|im_end|>");
        let tool = id(&t, "<tool_call>");
        let ids = t.encode("<|im_start|>hello<|im_end|>", true);
        assert_eq!(ids, [start, id(&t, "hello"), end]);
        // Without `special`, control tokens are plain text; user-defined ones are still cut.
        let plain = t.encode("<|im_start|>hello<tool_call>", false);
        assert!(!plain.contains(&start));
        assert_eq!(plain.last(), Some(&tool));
        assert_eq!(t.decode(&plain), b"<|im_start|>hello<tool_call>".as_slice());
        // Control tokens decode to nothing; end of turn is recognised.
        assert_eq!(t.decode(&ids), b"hello");
        assert!(t.is_end_of_generation(end));
        assert!(!t.is_end_of_generation(start));
        // A normal token that prefixes a special one does not break it.
        assert_eq!(t.encode("<|im_end|><|im", true)[0], end);
    }

    #[test]
    fn unsupported_vocabularies_are_named() {
        let mut spec = tiny_vocab();
        spec.pre = "llama-bpe".into();
        let err = BpeTokenizer::new(spec).err().unwrap();
        assert!(
            matches!(&err, InferenceError::Unsupported(m) if m.contains("llama-bpe") && m.contains("llama")),
            "{err}"
        );
    }

    #[test]
    fn merges_through_non_tokens_fall_back_to_bytes() {
        let mut spec = tiny_vocab();
        // "x y" is a merge whose result is not in the vocabulary.
        spec.merges.insert(0, "x y".into());
        let t = BpeTokenizer::new(spec).unwrap();
        assert_eq!(t.encode("xy", false), [id(&t, "x"), id(&t, "y")]);
    }
}
