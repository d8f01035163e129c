//! Just enough HTTP/1.1 to talk to Kith the way a client does: one request
//! per connection, `Content-Length` bodies. (No client crate for twenty lines.)

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

const TIMEOUT: Duration = Duration::from_secs(10);

/// A local port free right now (for a server started in another process).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Status and body of one exchange.
pub async fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<(u16, Vec<u8>), String> {
    tokio::time::timeout(TIMEOUT, async {
        let mut stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| e.to_string())?;
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream
            .write_all(head.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        stream.write_all(body).await.map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        stream
            .read_to_end(&mut raw)
            .await
            .map_err(|e| e.to_string())?;
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or("no header end")?;
        let head = String::from_utf8_lossy(&raw[..split]);
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or("no status")?;
        let mut body = raw[split + 4..].to_vec();
        if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
            body = unchunk(&body)?;
        }
        Ok((status, body))
    })
    .await
    .map_err(|_| "timed out".to_owned())?
}

fn unchunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("bad chunk")?;
        let size = usize::from_str_radix(String::from_utf8_lossy(&data[..line_end]).trim(), 16)
            .map_err(|e| e.to_string())?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(data.get(..size).ok_or("short chunk")?);
        data = data.get(size + 2..).ok_or("short chunk")?;
    }
}

/// `GET path`; Ok when it answers 200.
pub async fn get(port: u16, path: &str) -> Result<Vec<u8>, String> {
    match request(port, "GET", path, &[], b"").await? {
        (200, body) => Ok(body),
        (status, _) => Err(format!("status {status}")),
    }
}

/// A GraphQL request as `token`'s user; the response JSON.
pub async fn graphql(
    port: u16,
    token: &str,
    query: &str,
    variables: serde_json::Value,
) -> Result<serde_json::Value, String> {
    let body = serde_json::json!({ "query": query, "variables": variables }).to_string();
    let auth = format!("Bearer {token}");
    let (status, body) = request(
        port,
        "POST",
        "/graphql",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &auth),
        ],
        body.as_bytes(),
    )
    .await?;
    serde_json::from_slice(&body).map_err(|e| format!("status {status}: {e}"))
}
