//! Reading a benchmark file one record at a time ([`RecordStream`]), so that a caller holds a
//! few records, not the file: a benchmark over a 3 MB database holds two such states per
//! sample, about 70 MB parsed, and its reference JSON is hundreds of megabytes.
//!
//! The records and the errors are those of [`envsim_core::formats::records`] (a JSON array's
//! elements, or the non-blank lines of JSON Lines; the same located syntax errors), read from
//! any reader on a background thread. One difference follows from reading as a stream: a
//! syntax error is only found when the reader gets there, while the whole-file reader reports
//! it before any record. A caller that finds something wrong in a record must therefore ask
//! for the rest of the file's error ([`RecordStream::rest_error`]) and report that one first,
//! as the whole-file reader would.

use envsim_core::formats::{self, FormatError, Location, Record};
use serde::de::{SeqAccess, Visitor};
use serde::Deserializer as _;
use serde_json::Value;
use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use tokio::sync::mpsc;

/// Why a benchmark file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Reading the bytes failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The file is not a JSON array or JSON Lines (located as [`formats::records`] locates it).
    #[error(transparent)]
    Format(#[from] FormatError),
}

/// One item of a [`RecordStream`].
pub type RecordItem = Result<Record, ReadError>;

/// A benchmark file's records in file order, read on a background thread. The channel closes
/// after the last record, or right after an error; a channel that closes without either ended
/// because its thread failed.
#[derive(Debug)]
pub struct RecordStream {
    /// Where the records arrive.
    pub items: mpsc::Receiver<RecordItem>,
}

/// Records read ahead of the consumer: one, so that at most three are held (the one being
/// read, the one waiting, the one being used).
const READ_AHEAD: usize = 1;

/// What a [`RecordStream`] reads: a benchmark file ([`open_benchmark`]) or bytes in memory
/// (`std::io::Cursor`). Seeking is only needed for a JSON array with a syntax error: it is read
/// again from the start (whole) for the error's exact position.
pub trait Source: BufRead + Seek + Send {}

impl<T: BufRead + Seek + Send> Source for T {}

/// Buffer of [`open_benchmark`].
const BUFFER: usize = 256 * 1024;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Opens a benchmark file for a [`RecordStream`] and reads its first bytes, so that a file that
/// cannot be read (a folder, no permission) fails here, before anything else is done.
pub fn open_benchmark(path: &Path) -> io::Result<BufReader<std::fs::File>> {
    let mut reader = BufReader::with_capacity(BUFFER, std::fs::File::open(path)?);
    reader.fill_buf()?;
    Ok(reader)
}

impl RecordStream {
    /// Starts reading `reader` (a benchmark file named `source`, for messages).
    pub fn start<R: Source + 'static>(reader: R, source: &str) -> io::Result<Self> {
        let (tx, items) = mpsc::channel(READ_AHEAD);
        let source = source.to_owned();
        std::thread::Builder::new()
            .name("envsim-read-records".into())
            .spawn(move || produce(reader, &source, &tx))?;
        Ok(RecordStream { items })
    }

    /// The next record, waiting for it; `None` after the last. Not from async code (see
    /// [`next`](Self::next)).
    pub fn blocking_next(&mut self) -> Option<RecordItem> {
        self.items.blocking_recv()
    }

    /// The next record; `None` after the last.
    pub async fn next(&mut self) -> Option<RecordItem> {
        self.items.recv().await
    }

    /// Reads the rest of the file and returns its error, if it has one: the error to report
    /// before one the caller found in an earlier record (the whole-file reader would have
    /// found it first). Not from async code (see [`rest_error`](Self::rest_error)).
    pub fn blocking_rest_error(&mut self) -> Option<ReadError> {
        while let Some(item) = self.items.blocking_recv() {
            if let Err(error) = item {
                return Some(error);
            }
        }
        None
    }

    /// [`blocking_rest_error`](Self::blocking_rest_error) for async code.
    pub async fn rest_error(&mut self) -> Option<ReadError> {
        rest_error(&mut self.items).await
    }
}

/// The error the rest of a stream of records holds, if any (all records up to it are dropped).
pub async fn rest_error<T, E>(items: &mut mpsc::Receiver<Result<T, E>>) -> Option<E> {
    while let Some(item) = items.recv().await {
        if let Err(error) = item {
            return Some(error);
        }
    }
    None
}

fn produce<R: BufRead + Seek>(mut reader: R, source: &str, tx: &mpsc::Sender<RecordItem>) {
    let send = |item: RecordItem| tx.blocking_send(item).is_ok();
    let (head, first) = match start(&mut reader) {
        Ok(start) => start,
        Err(error) => {
            send(Err(error.into()));
            return;
        }
    };
    let input = io::Cursor::new(head).chain(&mut reader);
    match first {
        None => {
            send(Err(formats::empty_file_error(source).into()));
        }
        Some(b'[') => {
            if let Err(error) = array(input, source, &send) {
                let error = match error {
                    ReadError::Format(streamed) => ReadError::Format(
                        whole_array_error(&mut reader, source).unwrap_or(streamed),
                    ),
                    io => io,
                };
                send(Err(error));
            }
        }
        Some(_) => lines(input, source, &send),
    }
}

/// The syntax error of a JSON array file as [`formats::records`] reports it, read again whole
/// from the start (`None` when it cannot be read again, or has no error after all).
///
/// serde_json's reader of a stream reports some errors one byte further than its reader of a
/// slice, which [`formats::records`] uses (`number out of range`: the stream has already read
/// the byte after the number); an invalid file is therefore read again as a slice. Only its
/// bytes and one element at a time are held.
fn whole_array_error<R: Read + Seek>(reader: &mut R, source: &str) -> Option<FormatError> {
    reader.seek(SeekFrom::Start(0)).ok()?;
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes).ok()?;
    let bytes = bytes.strip_prefix(BOM).unwrap_or(&bytes);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let mut each = |_: Value| true;
    let error = (&mut de)
        .deserialize_seq(Elements { each: &mut each })
        .and_then(|_| de.end())
        .err()?;
    Some(formats::syntax_error(source, &error, 0))
}

/// Reads up to the first byte that is not whitespace, after a byte order mark: the bytes read
/// (without the mark) and that byte (`None`: the file is blank). Whitespace here is ASCII's, as
/// [`formats::records`] decides between a JSON array and JSON Lines.
fn start<R: BufRead>(reader: &mut R) -> io::Result<(Vec<u8>, Option<u8>)> {
    let mut head = Vec::new();
    reader
        .by_ref()
        .take(BOM.len() as u64)
        .read_to_end(&mut head)?;
    if head == BOM {
        head.clear();
    }
    loop {
        if let Some(&first) = head.iter().find(|b| !b.is_ascii_whitespace()) {
            return Ok((head, Some(first)));
        }
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok((head, None));
        }
        let n = buffer.len();
        head.extend_from_slice(buffer);
        reader.consume(n);
    }
}

/// JSON Lines: one record per non-blank line, as [`formats::line_record`] reads it.
fn lines<R: BufRead>(mut input: R, source: &str, send: &impl Fn(RecordItem) -> bool) {
    let mut line = Vec::new();
    let mut index = 0;
    for line_index in 0.. {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) => {}
            Err(error) => {
                send(Err(error.into()));
                return;
            }
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        match formats::line_record(text, line_index, index, source) {
            Ok(None) => {}
            Ok(Some(record)) => {
                index += 1;
                if !send(Ok(record)) {
                    return;
                }
            }
            Err(error) => {
                send(Err(error.into()));
                return;
            }
        }
    }
}

/// A JSON array: its elements one at a time, by serde_json's parser (the one that reads the whole
/// array, reading a stream). The error, if any, is returned, not sent.
fn array<R: Read>(
    input: R,
    source: &str,
    send: &impl Fn(RecordItem) -> bool,
) -> Result<(), ReadError> {
    let mut de = serde_json::Deserializer::from_reader(input);
    let mut index = 0;
    let mut each = |value: Value| {
        let record = Record {
            value,
            location: Location::Record(index),
            index,
        };
        index += 1;
        send(Ok(record))
    };
    let read = (&mut de)
        .deserialize_seq(Elements { each: &mut each })
        .and_then(|finished| {
            if finished {
                de.end()?;
            }
            Ok(())
        });
    read.map_err(|error| {
        if error.is_io() {
            ReadError::Io(error.into())
        } else {
            ReadError::Format(formats::syntax_error(source, &error, 0))
        }
    })
}

/// Hands each element of a sequence to `each`, which says whether to go on. The value is
/// `false` when it said no (the rest of the sequence is left unread).
struct Elements<'a, F> {
    each: &'a mut F,
}

impl<'de, F: FnMut(Value) -> bool> Visitor<'de> for Elements<'_, F> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while let Some(value) = seq.next_element::<Value>()? {
            if !(self.each)(value) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envsim_testkit::{to_json_array, BenchOptions, SyntheticBench};

    /// Every record of a stream, or its error (after which nothing may follow).
    fn drain(bytes: &[u8]) -> Result<Vec<Record>, FormatError> {
        let mut stream =
            RecordStream::start(io::Cursor::new(bytes.to_vec()), "f.json").expect("starts");
        let mut out = Vec::new();
        while let Some(item) = stream.blocking_next() {
            match item {
                Ok(record) => out.push(record),
                Err(ReadError::Format(error)) => {
                    assert!(stream.blocking_next().is_none(), "an item after the error");
                    return Err(error);
                }
                Err(ReadError::Io(error)) => panic!("{error}"),
            }
        }
        Ok(out)
    }

    /// The stream gives exactly what the whole-file reader gives.
    fn same(bytes: &[u8]) {
        assert_eq!(
            drain(bytes),
            formats::records(bytes, "f.json"),
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }

    #[test]
    fn records_and_errors_are_the_whole_file_readers() {
        let records = SyntheticBench::records(4, 2, &BenchOptions::default());
        let array = to_json_array(&records);
        let lines: String = records.iter().map(|r| format!("{r}\n")).collect();
        assert_eq!(drain(array.as_bytes()).expect("valid").len(), records.len());
        let deep = format!("[{}{}]", "[".repeat(200), "]".repeat(200));
        let cases: Vec<Vec<u8>> = vec![
            array.clone().into_bytes(),
            lines.clone().into_bytes(),
            format!("\u{feff}{array}").into_bytes(),
            format!("\u{feff}\n\n{lines}\n  \n").into_bytes(),
            format!("  \n\t{array}\n").into_bytes(),
            lines.replace('\n', "\r\n").into_bytes(),
            // Syntax errors, late ones included, in both forms.
            b"[{\"a\": 1},\n {\"b\": }]".to_vec(),
            format!("{} x", array).into_bytes(),
            array.as_bytes()[..array.len() - 30].to_vec(),
            format!("{}\n{{\"a\": \n{}", lines, lines).into_bytes(),
            b"[1, 2,]".to_vec(),
            b"[1 2]".to_vec(),
            b"[1, 2".to_vec(),
            b"[".to_vec(),
            b"[]".to_vec(),
            b"[] []".to_vec(),
            b"[1e999]".to_vec(),
            b"[1,\n 2e999\n]".to_vec(),
            b"[1, 2e999".to_vec(),
            b"[{\"a\": -1.5e400}, 3]".to_vec(),
            b"[-]".to_vec(),
            b"[1.]".to_vec(),
            b"[1e+]".to_vec(),
            b"[01]".to_vec(),
            b"[tru]".to_vec(),
            b"[nul".to_vec(),
            b"[{\"a\" 1}]".to_vec(),
            b"[{1: 2}]".to_vec(),
            b"[\"\\u12\"]".to_vec(),
            b"[\"a\x01b\"]".to_vec(),
            b"[\"\xff\xfe\"]".to_vec(),
            b"[\n\"ok\",\n\"\xc3\x28\"]".to_vec(),
            b"{\"x\": \"\xff\xfe\"}\n".to_vec(),
            b"\x0c[1]".to_vec(),
            b"\xEF\xBB".to_vec(),
            b"  \n ".to_vec(),
            b"".to_vec(),
            b"3\n\n{\"a\": [1,\n".to_vec(),
            deep.into_bytes(),
            format!("[{}1{}]", "[".repeat(126), "]".repeat(126)).into_bytes(),
            format!("[{}1{}]", "[".repeat(127), "]".repeat(127)).into_bytes(),
        ];
        for bytes in &cases {
            same(bytes);
        }
    }

    #[test]
    fn a_read_failure_is_an_io_error() {
        /// Gives its bytes, then fails.
        struct Failing(io::Cursor<Vec<u8>>);
        impl Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                match self.0.read(buf)? {
                    0 => Err(io::Error::other("disk on fire")),
                    n => Ok(n),
                }
            }
        }
        impl Seek for Failing {
            fn seek(&mut self, _: SeekFrom) -> io::Result<u64> {
                Err(io::Error::other("cannot seek"))
            }
        }
        for (head, good) in [
            (&b"["[..], 0),
            (b"[1, {\"a\": 2}, ", 2),
            (b"{", 0),
            (b"{\"a\": 1}\n\n{\"b\"", 1),
        ] {
            let reader = BufReader::new(Failing(io::Cursor::new(head.to_vec())));
            let mut stream = RecordStream::start(reader, "f").expect("starts");
            for _ in 0..good {
                assert!(matches!(stream.blocking_next(), Some(Ok(_))));
            }
            match stream.blocking_next() {
                Some(Err(ReadError::Io(error))) => assert_eq!(error.to_string(), "disk on fire"),
                other => panic!("{other:?}"),
            }
            assert!(stream.blocking_next().is_none());
        }
    }

    #[test]
    fn the_rest_error_is_found_after_the_good_records() {
        let records = SyntheticBench::records(3, 1, &BenchOptions::default());
        let text = format!("{}x", to_json_array(&records));
        let mut stream = RecordStream::start(io::Cursor::new(text.clone().into_bytes()), "f.json")
            .expect("starts");
        assert!(matches!(stream.blocking_next(), Some(Ok(_))));
        let Some(ReadError::Format(error)) = stream.blocking_rest_error() else {
            panic!("no error")
        };
        assert_eq!(Err(error), formats::records(text.as_bytes(), "f.json"));
        let mut good = RecordStream::start(
            io::Cursor::new(to_json_array(&records).into_bytes()),
            "f.json",
        )
        .expect("starts");
        assert!(good.blocking_rest_error().is_none());
    }
}
