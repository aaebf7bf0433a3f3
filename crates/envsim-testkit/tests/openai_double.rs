//! Exact behaviour of the OpenAI-compatible chat-completions test double, over plain HTTP/1.1.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use envsim_testkit::openai_double::{DoubleConfig, Fault, OpenAiDouble};
use serde_json::{json, Value};

/// A parsed HTTP response.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.body))
    }
}

fn addr_of(base_url: &str) -> SocketAddr {
    base_url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/v1"))
        .unwrap_or_else(|| panic!("unexpected base url {base_url}"))
        .parse()
        .unwrap()
}

fn write_request(
    stream: &mut TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) {
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
}

fn parse_reply(raw: &[u8]) -> Reply {
    let text = String::from_utf8(raw.to_vec()).expect("response is UTF-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("complete header block");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers = lines
        .map(|line| {
            let (name, value) = line.split_once(':').expect("header line");
            (name.trim().to_string(), value.trim().to_string())
        })
        .collect();
    Reply {
        status,
        headers,
        body: body.to_string(),
    }
}

/// One request on a fresh connection (`Connection: close`), read to EOF.
fn send(base_url: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut stream = TcpStream::connect(addr_of(base_url)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write_request(&mut stream, method, path, headers, body);
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    parse_reply(&raw)
}

fn post(double: &OpenAiDouble, body: &Value) -> Reply {
    post_raw(&double.base_url(), &[], &body.to_string())
}

fn post_raw(base_url: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    send(base_url, "POST", "/v1/chat/completions", headers, body)
}

fn chat(key: &str) -> Value {
    json!({"model": "test-model", "messages": [{"role": "user", "content": key}]})
}

fn answers(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn faults(key: &str, list: Vec<Fault>) -> HashMap<String, Vec<Fault>> {
    HashMap::from([(key.to_string(), list)])
}

fn content_of(reply: &Reply) -> String {
    reply.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string()
}

fn assert_openai_error(reply: &Reply, status: u16, kind: &str) -> Value {
    assert_eq!(reply.status, status, "{reply:?}");
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let body = reply.json();
    assert_eq!(body["error"]["type"], kind, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
    body
}

#[test]
fn normal_answer_has_content_usage_and_echoed_model() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        answers: answers(&[("ping", "pong!")]),
        ..DoubleConfig::default()
    })
    .unwrap();
    assert!(double.base_url().starts_with("http://127.0.0.1:"));
    assert!(double.base_url().ends_with("/v1"));
    // 8 + 4 prompt chars → 3 tokens; 5 answer chars → 2 tokens.
    let reply = post(
        &double,
        &json!({"model": "gpt-x-mini", "temperature": 0, "messages": [
            {"role": "system", "content": "abcdefgh"},
            {"role": "user", "content": "ping"},
        ]}),
    );
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let body = reply.json();
    assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-double-"));
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["created"], 0);
    assert_eq!(body["model"], "gpt-x-mini");
    assert_eq!(
        body["choices"],
        json!([{"index": 0, "message": {"role": "assistant", "content": "pong!"}, "finish_reason": "stop"}])
    );
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5})
    );
    double.shutdown();
}

#[test]
fn usage_counts_unicode_chars_and_can_be_left_out() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        answers: answers(&[("héé", "ééééé")]),
        ..DoubleConfig::default()
    })
    .unwrap();
    let usage = post(&double, &chat("héé")).json()["usage"].clone();
    assert_eq!(
        usage,
        json!({"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3})
    );
    drop(double);

    let double = OpenAiDouble::spawn(DoubleConfig {
        answers: answers(&[("ping", "pong")]),
        usage: false,
        ..DoubleConfig::default()
    })
    .unwrap();
    let body = post(&double, &chat("ping")).json();
    assert_eq!(body["choices"][0]["message"]["content"], "pong");
    assert!(body.get("usage").is_none(), "{body}");
}

#[test]
fn key_is_the_last_user_message() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        answers: answers(&[("first", "one"), ("second", "two")]),
        ..DoubleConfig::default()
    })
    .unwrap();
    let reply = post(
        &double,
        &json!({"model": "m", "messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "one"},
            {"role": "user", "content": "second"},
            {"role": "assistant", "content": "an assistant message after the last user one"},
        ]}),
    );
    assert_eq!(content_of(&reply), "two");
    assert_eq!(double.requests_for("second"), 1);
    assert_eq!(double.requests_for("first"), 0);
}

#[test]
fn unknown_key_is_400_naming_it() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        answers: answers(&[("ping", "pong")]),
        ..DoubleConfig::default()
    })
    .unwrap();
    let reply = post(&double, &chat("who is this"));
    let body = assert_openai_error(&reply, 400, "invalid_request_error");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("who is this"), "{message}");
    assert!(message.contains("default_answer"), "{message}");
    assert_eq!(double.requests_for("who is this"), 1);
}

#[test]
fn default_answer_serves_unknown_keys() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        answers: answers(&[("ping", "pong")]),
        default_answer: Some("{\"ok\": true}".to_string()),
        ..DoubleConfig::default()
    })
    .unwrap();
    assert_eq!(content_of(&post(&double, &chat("ping"))), "pong");
    let reply = post(&double, &chat("anything else"));
    assert_eq!(reply.status, 200);
    assert_eq!(content_of(&reply), "{\"ok\": true}");
    assert_eq!(reply.json()["choices"][0]["finish_reason"], "stop");
}

#[test]
fn rate_limited_is_429_with_retry_after() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        default_answer: Some("fine".to_string()),
        faults: HashMap::from([
            (
                "a".to_string(),
                vec![Fault::RateLimited {
                    retry_after_secs: Some(7),
                }],
            ),
            (
                "b".to_string(),
                vec![Fault::RateLimited {
                    retry_after_secs: None,
                }],
            ),
        ]),
        ..DoubleConfig::default()
    })
    .unwrap();
    let reply = post(&double, &chat("a"));
    let body = assert_openai_error(&reply, 429, "requests");
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    assert_eq!(reply.header("retry-after"), Some("7"));
    let reply = post(&double, &chat("b"));
    assert_openai_error(&reply, 429, "requests");
    assert_eq!(reply.header("retry-after"), None);
}

#[test]
fn server_error_is_500() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        default_answer: Some("fine".to_string()),
        faults: faults("k", vec![Fault::ServerError]),
        ..DoubleConfig::default()
    })
    .unwrap();
    assert_openai_error(&post(&double, &chat("k")), 500, "server_error");
}

#[test]
fn malformed_body_is_200_json_content_type_but_not_json() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        default_answer: Some("fine".to_string()),
        faults: faults("k", vec![Fault::MalformedBody]),
        ..DoubleConfig::default()
    })
    .unwrap();
    let reply = post(&double, &chat("k"));
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.body, "<html>oops</html>");
    assert!(serde_json::from_str::<Value>(&reply.body).is_err());
}

#[test]
fn truncated_body_is_a_complete_response_with_half_a_completion() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        answers: answers(&[("k", "a fairly long answer so the cut is mid-body")]),
        faults: faults("k", vec![Fault::TruncatedBody]),
        ..DoubleConfig::default()
    })
    .unwrap();
    let reply = post(&double, &chat("k"));
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(
        reply.header("content-length"),
        Some(reply.body.len().to_string().as_str())
    );
    assert!(
        reply.body.starts_with("{\"id\":\"chatcmpl-double-"),
        "{}",
        reply.body
    );
    assert!(reply.body.len() > 20);
    assert!(serde_json::from_str::<Value>(&reply.body).is_err());
    // The next request for the key is answered normally, and is twice (±1) as long.
    let full = post(&double, &chat("k"));
    assert_eq!(
        content_of(&full),
        "a fairly long answer so the cut is mid-body"
    );
    assert!(full.body.len() / 2 <= reply.body.len() + 1);
}

#[test]
fn content_fault_replaces_the_answer_with_finish_reason_length() {
    let cut_off = "Sure! Here is the state:\n```json\n{\"users\": {\"u1\": ";
    let double = OpenAiDouble::spawn(DoubleConfig {
        answers: answers(&[("k", "{}")]),
        faults: faults("k", vec![Fault::Content(cut_off.to_string())]),
        ..DoubleConfig::default()
    })
    .unwrap();
    let reply = post(&double, &chat("k"));
    assert_eq!(reply.status, 200);
    let body = reply.json();
    assert_eq!(body["choices"][0]["message"]["content"], cut_off);
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    assert_eq!(body["model"], "test-model");
    let tokens = cut_off.chars().count().div_ceil(4);
    assert_eq!(body["usage"]["completion_tokens"], tokens);
}

#[test]
fn faults_are_consumed_in_order_per_key_then_normal_answers() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        answers: answers(&[("a", "A"), ("b", "B")]),
        faults: faults(
            "a",
            vec![
                Fault::ServerError,
                Fault::RateLimited {
                    retry_after_secs: Some(1),
                },
                Fault::Content("partial".to_string()),
            ],
        ),
        ..DoubleConfig::default()
    })
    .unwrap();
    assert_eq!(post(&double, &chat("a")).status, 500);
    assert_eq!(content_of(&post(&double, &chat("b"))), "B");
    assert_eq!(post(&double, &chat("a")).status, 429);
    assert_eq!(content_of(&post(&double, &chat("b"))), "B");
    assert_eq!(content_of(&post(&double, &chat("a"))), "partial");
    for _ in 0..2 {
        let reply = post(&double, &chat("a"));
        assert_eq!(reply.status, 200);
        assert_eq!(content_of(&reply), "A");
        assert_eq!(reply.json()["choices"][0]["finish_reason"], "stop");
    }
    assert_eq!(double.requests_for("a"), 5);
    assert_eq!(double.requests_for("b"), 2);
    assert_eq!(double.requests(), 7);
}

#[test]
fn api_key_is_required_when_configured() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        default_answer: Some("ok".to_string()),
        api_key: Some("sk-test".to_string()),
        ..DoubleConfig::default()
    })
    .unwrap();
    let body = chat("hi").to_string();
    let url = double.base_url();
    let missing = post_raw(&url, &[], &body);
    assert_eq!(
        assert_openai_error(&missing, 401, "invalid_request_error")["error"]["code"],
        "invalid_api_key"
    );
    let wrong = post_raw(&url, &[("Authorization", "Bearer sk-other")], &body);
    assert_openai_error(&wrong, 401, "invalid_request_error");
    let not_bearer = post_raw(&url, &[("Authorization", "sk-test")], &body);
    assert_openai_error(&not_bearer, 401, "invalid_request_error");
    let right = post_raw(&url, &[("Authorization", "Bearer sk-test")], &body);
    assert_eq!(right.status, 200);
    assert_eq!(content_of(&right), "ok");
    assert_eq!(double.requests(), 4);
    // Rejected requests are not counted against their key (so faults are not consumed).
    assert_eq!(double.requests_for("hi"), 1);
}

#[test]
fn latency_delays_answers_and_fault_answers() {
    let latency = Duration::from_millis(150);
    let double = OpenAiDouble::spawn(DoubleConfig {
        latency,
        default_answer: Some("slow".to_string()),
        faults: faults("f", vec![Fault::ServerError]),
        ..DoubleConfig::default()
    })
    .unwrap();
    let start = Instant::now();
    assert_eq!(content_of(&post(&double, &chat("x"))), "slow");
    assert!(start.elapsed() >= latency, "{:?}", start.elapsed());
    let start = Instant::now();
    assert_eq!(post(&double, &chat("f")).status, 500);
    assert!(start.elapsed() >= latency, "{:?}", start.elapsed());
}

#[test]
fn hang_never_answers_and_does_not_block_other_requests() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        default_answer: Some("ok".to_string()),
        faults: faults("stuck", vec![Fault::Hang]),
        ..DoubleConfig::default()
    })
    .unwrap();
    let mut stream = TcpStream::connect(addr_of(&double.base_url())).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(400)))
        .unwrap();
    write_request(
        &mut stream,
        "POST",
        "/v1/chat/completions",
        &[],
        &chat("stuck").to_string(),
    );
    let mut buf = [0u8; 256];
    match stream.read(&mut buf) {
        Err(e) => assert!(
            matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "{e:?}"
        ),
        Ok(n) => panic!(
            "hung request got {n} bytes: {:?}",
            String::from_utf8_lossy(&buf[..n])
        ),
    }
    // The double keeps serving meanwhile, and the key's fault list is used up.
    assert_eq!(content_of(&post(&double, &chat("other"))), "ok");
    assert_eq!(content_of(&post(&double, &chat("stuck"))), "ok");
    assert_eq!(double.requests_for("stuck"), 2);
    // Shutting down does not wait for the hung request.
    double.shutdown();
    drop(stream);
}

#[test]
fn max_in_flight_sees_concurrent_slow_requests() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        latency: Duration::from_millis(1000),
        default_answer: Some("ok".to_string()),
        ..DoubleConfig::default()
    })
    .unwrap();
    assert_eq!(double.max_in_flight(), 0);
    let url = double.base_url();
    let barrier = Arc::new(Barrier::new(2));
    let threads: Vec<_> = (0..2)
        .map(|i| {
            let url = url.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                post_raw(&url, &[], &chat(&format!("k{i}")).to_string())
            })
        })
        .collect();
    for thread in threads {
        let reply = thread.join().unwrap();
        assert_eq!(content_of(&reply), "ok");
    }
    assert!(double.max_in_flight() >= 2, "{}", double.max_in_flight());
    assert_eq!(double.requests(), 2);
}

#[test]
fn many_concurrent_connections_are_all_answered() {
    // Kept below a 1024 open-file limit: every connection costs a descriptor on both sides.
    const CLIENTS: usize = 400;
    let double = OpenAiDouble::spawn(DoubleConfig {
        latency: Duration::from_millis(300),
        default_answer: Some("ok".to_string()),
        record_bodies: false,
        ..DoubleConfig::default()
    })
    .unwrap();
    let url = double.base_url();
    let threads: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let url = url.clone();
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || post_raw(&url, &[], &chat(&format!("k{}", i % 7)).to_string()))
                .unwrap()
        })
        .collect();
    for thread in threads {
        assert_eq!(content_of(&thread.join().unwrap()), "ok");
    }
    assert_eq!(double.requests(), CLIENTS);
    assert_eq!(
        (0..7)
            .map(|k| double.requests_for(&format!("k{k}")))
            .sum::<usize>(),
        CLIENTS
    );
    assert!(double.max_in_flight() >= 2);
    assert!(double.bodies().is_empty());
}

#[test]
fn counts_and_bodies_are_recorded_in_arrival_order() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        default_answer: Some("ok".to_string()),
        ..DoubleConfig::default()
    })
    .unwrap();
    let sent = [
        chat("x"),
        json!({"model": "m2", "max_tokens": 5, "messages": [{"role": "user", "content": "y"}]}),
        chat("x"),
    ];
    for body in &sent {
        assert_eq!(post(&double, body).status, 200);
    }
    assert_eq!(double.requests(), 3);
    assert_eq!(double.requests_for("x"), 2);
    assert_eq!(double.requests_for("y"), 1);
    assert_eq!(double.requests_for("z"), 0);
    assert_eq!(double.bodies(), sent.to_vec());
    assert_eq!(double.max_in_flight(), 1);
}

#[test]
fn invalid_request_bodies_are_400() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        default_answer: Some("ok".to_string()),
        ..DoubleConfig::default()
    })
    .unwrap();
    let url = double.base_url();
    let cases = [
        ("not json", "not JSON"),
        ("[1, 2]", "object"),
        (
            r#"{"messages": [{"role": "user", "content": "x"}]}"#,
            "model",
        ),
        (
            r#"{"model": 3, "messages": [{"role": "user", "content": "x"}]}"#,
            "model",
        ),
        (r#"{"model": "m"}"#, "messages"),
        (r#"{"model": "m", "messages": []}"#, "empty"),
        (r#"{"model": "m", "messages": {"role": "user"}}"#, "array"),
        (r#"{"model": "m", "messages": ["hi"]}"#, "messages[0]"),
        (r#"{"model": "m", "messages": [{"content": "x"}]}"#, "role"),
        (
            r#"{"model": "m", "messages": [{"role": "user"}]}"#,
            "content",
        ),
        (
            r#"{"model": "m", "messages": [{"role": "user", "content": null}]}"#,
            "content",
        ),
        (
            r#"{"model": "m", "messages": [{"role": "system", "content": "x"}]}"#,
            "user",
        ),
        (
            r#"{"model": "m", "stream": true, "messages": [{"role": "user", "content": "x"}]}"#,
            "stream",
        ),
    ];
    for (body, needle) in cases {
        let reply = post_raw(&url, &[], body);
        let error = assert_openai_error(&reply, 400, "invalid_request_error");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{body}: {message}");
    }
    assert_eq!(double.requests(), cases.len());
    let bodies = double.bodies();
    assert_eq!(bodies.len(), cases.len());
    assert_eq!(bodies[0], json!("not json"));
    assert_eq!(bodies[1], json!([1, 2]));
}

#[test]
fn other_paths_are_404() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        default_answer: Some("ok".to_string()),
        ..DoubleConfig::default()
    })
    .unwrap();
    let url = double.base_url();
    let body = chat("x").to_string();
    assert_openai_error(
        &send(&url, "POST", "/v1/completions", &[], &body),
        404,
        "invalid_request_error",
    );
    assert_openai_error(
        &send(&url, "GET", "/v1/models", &[], ""),
        404,
        "invalid_request_error",
    );
    assert_eq!(
        send(&url, "GET", "/v1/chat/completions", &[], "").status,
        405
    );
    assert_eq!(double.requests(), 0);
}

#[tokio::test]
async fn works_inside_an_async_test() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        default_answer: Some("async ok".to_string()),
        ..DoubleConfig::default()
    })
    .unwrap();
    let url = double.base_url();
    let reply = tokio::task::spawn_blocking(move || post_raw(&url, &[], &chat("x").to_string()))
        .await
        .unwrap();
    assert_eq!(content_of(&reply), "async ok");
    drop(double);
}

fn temp_file(name: &str, contents: &str) -> std::path::PathBuf {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("openai-double-{}-{name}", std::process::id()));
    std::fs::write(&path, contents).unwrap();
    path
}

#[test]
fn binary_prints_listening_line_and_answers() {
    let answers = temp_file(
        "answers.jsonl",
        "{\"key\": \"ping\", \"content\": \"pong from file\"}\n\n{\"key\": \"two\", \"content\": \"2\"}\n",
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_openai-double"))
        .args([
            "--port",
            "0",
            "--latency-ms",
            "1",
            "--default-answer",
            "fallback",
        ])
        .arg("--answers")
        .arg(&answers)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let result = std::panic::catch_unwind(|| {
        let url = line
            .strip_prefix("listening on ")
            .and_then(|rest| rest.strip_suffix('\n'))
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        let reply = post_raw(url, &[], &chat("ping").to_string());
        assert_eq!(content_of(&reply), "pong from file");
        assert_eq!(reply.json()["model"], "test-model");
        let reply = post_raw(url, &[], &chat("something").to_string());
        assert_eq!(content_of(&reply), "fallback");
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_file(&answers);
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

fn run_binary(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_openai-double"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn binary_rejects_bad_usage_with_exit_code_2() {
    let (code, stdout, stderr) = run_binary(&["--latency-ms", "soon"]);
    assert_eq!(code, Some(2));
    assert!(stdout.is_empty());
    assert!(stderr.contains("--latency-ms"), "{stderr}");
    assert!(stderr.contains("usage: openai-double"), "{stderr}");

    let (code, _, stderr) = run_binary(&["--verbose"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--verbose"), "{stderr}");

    let (code, _, stderr) = run_binary(&["--port"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--port needs a value"), "{stderr}");

    let (code, _, stderr) = run_binary(&["--port", "70000"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("70000"), "{stderr}");

    let (code, stdout, _) = run_binary(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("--answers FILE.jsonl"), "{stdout}");
}

#[test]
fn binary_reports_bad_answer_lines_with_file_and_line() {
    let path = temp_file(
        "bad.jsonl",
        "{\"key\": \"a\", \"content\": \"A\"}\n{\"key\": \"b\"}\n",
    );
    let shown = path.display().to_string();
    let (code, stdout, stderr) = run_binary(&["--answers", &shown]);
    assert_eq!(code, Some(2));
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains(&format!("{shown}:2:")), "{stderr}");
    assert!(stderr.contains("content"), "{stderr}");

    std::fs::write(&path, "{\"key\": \"a\", \"content\": \"A\"}\nnot json\n").unwrap();
    let (code, _, stderr) = run_binary(&["--answers", &shown]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains(&format!("{shown}:2:")), "{stderr}");

    std::fs::write(
        &path,
        "{\"key\": \"a\", \"content\": \"A\"}\n{\"key\": \"a\", \"content\": \"B\"}\n",
    )
    .unwrap();
    let (code, _, stderr) = run_binary(&["--answers", &shown]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains(&format!("{shown}:2: duplicate key")),
        "{stderr}"
    );
    let _ = std::fs::remove_file(&path);

    let (code, _, stderr) = run_binary(&["--answers", &shown]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains(&shown), "{stderr}");
}
