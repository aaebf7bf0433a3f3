//! The model downloader against a local file server (a test double speaking just enough
//! HTTP/1.1): verified downloads, checksum announcements, truncation, HTTP errors, Hugging Face
//! URL layout.

use envsim_model::model::{download, hf_url, verify, ModelError};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;

/// One served path: `(path, status, extra headers, body, declared length)`.
type Route = (
    &'static str,
    u16,
    Vec<(&'static str, String)>,
    Vec<u8>,
    Option<usize>,
);

/// Serves each connection by path: `(path, status, extra headers, body, declared length)`.
fn serve(routes: Vec<Route>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).is_err() || header == "\r\n" || header.is_empty() {
                    break;
                }
            }
            let path = request_line
                .split_whitespace()
                .nth(1)
                .unwrap_or("/")
                .to_owned();
            let route = routes.iter().find(|r| r.0 == path);
            let (status, headers, body, declared) = match route {
                Some((_, s, h, b, d)) => (*s, h.clone(), b.clone(), d.unwrap_or(b.len())),
                None => (404, vec![], b"not found".to_vec(), 9),
            };
            let mut head = format!(
                "HTTP/1.1 {status} X\r\ncontent-length: {declared}\r\nconnection: close\r\n"
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    format!("http://{addr}")
}

fn model_bytes() -> Vec<u8> {
    let mut bytes = b"GGUF".to_vec();
    bytes.extend((0..100_000u32).map(|i| (i % 251) as u8));
    bytes
}

fn sha(bytes: &[u8]) -> String {
    use sha2::Digest;
    envsim_core::hex::encode(&sha2::Sha256::digest(bytes))
}

fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Runtime::new().unwrap().block_on(f)
}

/// Temporary files of unfinished downloads (hidden `.NAME…tmp` files next to the destination).
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') || n.ends_with(".tmp"))
        .collect()
}

#[test]
fn verified_downloads_land_atomically() {
    let bytes = model_bytes();
    let good = sha(&bytes);
    let base = serve(vec![
        (
            "/Qwen/M-GGUF/resolve/main/m.gguf",
            200,
            vec![("x-linked-etag", format!("\"{good}\""))],
            bytes.clone(),
            None,
        ),
        ("/plain.gguf", 200, vec![], bytes.clone(), None),
    ]);
    let dir = tempfile::tempdir().unwrap();
    // Hugging Face layout, checksum taken from the server's announcement.
    let dest = dir.path().join("m.gguf");
    let mut seen = 0;
    let got = run(download(
        &hf_url(&base, "Qwen/M-GGUF", "main", "m.gguf"),
        &dest,
        None,
        &mut |done, total| {
            assert_eq!(total, Some(bytes.len() as u64));
            seen = done;
        },
    ))
    .unwrap();
    assert_eq!(got, good);
    assert_eq!(seen, bytes.len() as u64);
    assert_eq!(std::fs::read(&dest).unwrap(), bytes);
    verify(&dest, Some(bytes.len() as u64), Some(&good)).unwrap();
    // A given checksum works without an announcement...
    let plain = dir.path().join("plain.gguf");
    run(download(
        &format!("{base}/plain.gguf"),
        &plain,
        Some(&good),
        &mut |_, _| {},
    ))
    .unwrap();
    assert_eq!(std::fs::read(&plain).unwrap(), bytes);
    // ...and without either there is nothing to verify against: refused.
    let err = run(download(
        &format!("{base}/plain.gguf"),
        &dir.path().join("x.gguf"),
        None,
        &mut |_, _| {},
    ))
    .unwrap_err();
    assert!(
        err.to_string().contains("no SHA-256 to verify against"),
        "{err}"
    );
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn bad_downloads_fail_clearly_and_leave_nothing() {
    let bytes = model_bytes();
    let good = sha(&bytes);
    let mut corrupt = bytes.clone();
    corrupt[500] ^= 1;
    let base = serve(vec![
        ("/corrupt.gguf", 200, vec![], corrupt, None),
        (
            "/announced.gguf",
            200,
            vec![("x-linked-etag", format!("\"{}\"", "0".repeat(64)))],
            bytes.clone(),
            None,
        ),
        (
            "/truncated.gguf",
            200,
            vec![],
            bytes[..1000].to_vec(),
            Some(bytes.len()),
        ),
        ("/denied.gguf", 401, vec![], b"auth".to_vec(), None),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("m.gguf");
    let err = run(download(
        &format!("{base}/corrupt.gguf"),
        &dest,
        Some(&good),
        &mut |_, _| {},
    ))
    .unwrap_err();
    assert!(matches!(err, ModelError::WrongHash { .. }), "{err}");
    let err = run(download(
        &format!("{base}/announced.gguf"),
        &dest,
        Some(&good),
        &mut |_, _| {},
    ))
    .unwrap_err();
    assert!(
        err.to_string().contains("the server announces SHA-256 000"),
        "{err}"
    );
    let err = run(download(
        &format!("{base}/truncated.gguf"),
        &dest,
        Some(&good),
        &mut |_, _| {},
    ))
    .unwrap_err();
    assert!(matches!(err, ModelError::Download { .. }), "{err}");
    let err = run(download(
        &format!("{base}/denied.gguf"),
        &dest,
        Some(&good),
        &mut |_, _| {},
    ))
    .unwrap_err();
    assert!(err.to_string().contains("HTTP 401"), "{err}");
    let err = run(download(
        &format!("{base}/nothing.gguf"),
        &dest,
        Some(&good),
        &mut |_, _| {},
    ))
    .unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("download of {base}/nothing.gguf failed: HTTP 404")),
        "{err}"
    );
    assert!(!dest.exists());
    assert!(leftovers(dir.path()).is_empty());
}
