//! Load generation over real TCP: a minimal HTTP/1.1 keep-alive client
//! (one request in flight per connection, as a browser or an API gateway
//! would hold it), closed-loop clients and an open-loop pacer.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One answer's `Server-Timing` (with `KITH_SERVER_TIMING=true`): its time
/// in Kith, and of it the time of the PostgreSQL statements and Redis round
/// trips made for it, µs, and how many.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timing {
    pub kith_us: u64,
    pub pg_us: u64,
    pub statements: u64,
    pub redis_us: u64,
    pub round_trips: u64,
}

impl Timing {
    /// From a `Server-Timing` header's value (lower case).
    fn parse(value: &str) -> Option<Self> {
        let mut timing = Self::default();
        let mut kith = None;
        for metric in value.split(',') {
            let mut parts = metric.trim().split(';');
            let name = parts.next()?;
            let (mut us, mut count) = (0, 0);
            for part in parts {
                if let Some(ms) = part.strip_prefix("dur=") {
                    us = (ms.parse::<f64>().ok()? * 1000.0).round() as u64;
                } else if let Some(desc) = part.strip_prefix("desc=") {
                    let first = desc.trim_matches('"').split(' ').next()?;
                    count = first.parse().unwrap_or(0);
                }
            }
            match name {
                "kith" => kith = Some(us),
                "pg" => (timing.pg_us, timing.statements) = (us, count),
                "redis" => (timing.redis_us, timing.round_trips) = (us, count),
                _ => {}
            }
        }
        timing.kith_us = kith?;
        Some(timing)
    }
}

/// One keep-alive connection to Kith.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// The last answer's `Server-Timing`, when it carried one.
    pub timing: Option<Timing>,
}

impl Conn {
    /// Opens a connection.
    pub async fn open(addr: SocketAddr) -> std::io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            buf: Vec::with_capacity(16 * 1024),
            timing: None,
        })
    }

    /// Sends one request and reads its whole answer: `(status, body)`.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &str,
    ) -> std::io::Result<(u16, Vec<u8>)> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: kith\r\n");
        if let Some(token) = token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        if method == "POST" {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        let mut request = head.into_bytes();
        request.extend_from_slice(body.as_bytes());
        self.stream.write_all(&request).await?;
        self.read_response().await
    }

    async fn fill(&mut self) -> std::io::Result<()> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    async fn read_response(&mut self) -> std::io::Result<(u16, Vec<u8>)> {
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            self.fill().await?;
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).to_ascii_lowercase();
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let length = head.lines().find_map(|l| {
            l.strip_prefix("content-length:")
                .and_then(|v| v.trim().parse::<usize>().ok())
        });
        self.timing = head
            .lines()
            .find_map(|l| Timing::parse(l.strip_prefix("server-timing:")?));
        let chunked = head.contains("transfer-encoding: chunked");
        let mut body = Vec::new();
        if let Some(length) = length {
            while self.buf.len() < head_end + length {
                self.fill().await?;
            }
            body.extend_from_slice(&self.buf[head_end..head_end + length]);
            self.buf.drain(..head_end + length);
        } else if chunked {
            let mut at = head_end;
            loop {
                let line_end = loop {
                    if let Some(i) = find(&self.buf[at..], b"\r\n") {
                        break at + i;
                    }
                    self.fill().await?;
                };
                let size_text = String::from_utf8_lossy(&self.buf[at..line_end]).to_string();
                let size =
                    usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                        .map_err(|_| std::io::Error::other("bad chunk size"))?;
                let data = line_end + 2;
                while self.buf.len() < data + size + 2 {
                    self.fill().await?;
                }
                body.extend_from_slice(&self.buf[data..data + size]);
                at = data + size + 2;
                if size == 0 {
                    break;
                }
            }
            self.buf.drain(..at);
        } else {
            return Err(std::io::Error::other("response without a length"));
        }
        Ok((status, body))
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// One request to send: a bearer token (or none) and a JSON body.
pub struct Call {
    /// Bearer token.
    pub token: Option<String>,
    /// The GraphQL request, JSON.
    pub body: String,
}

/// Makes the `i`-th request of a phase.
pub type MakeCall = Arc<dyn Fn(u64) -> Call + Send + Sync>;

/// What a phase of load measured.
#[derive(Default)]
pub struct Outcome {
    /// Latencies of the successful requests, µs.
    pub latencies: Vec<u64>,
    /// The `Server-Timing` of the successful requests whose answers
    /// carried one.
    pub timings: Vec<Timing>,
    /// Failed requests by cause (GraphQL error code, HTTP status or I/O).
    pub errors: BTreeMap<String, u64>,
    /// How long the phase ran.
    pub elapsed: Duration,
}

impl Outcome {
    /// Requests sent (successful or not).
    pub fn requests(&self) -> u64 {
        self.latencies.len() as u64 + self.errors.values().sum::<u64>()
    }

    /// Failed requests.
    pub fn failed(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Keeps an answer's `Server-Timing`, if it carried one.
    fn record(&mut self, timing: Option<Timing>) {
        if let Some(timing) = timing {
            self.timings.push(timing);
        }
    }

    /// Adds `other`'s requests to these.
    pub fn merge(&mut self, other: &Outcome) {
        self.latencies.extend(&other.latencies);
        self.timings.extend(&other.timings);
        for (k, v) in &other.errors {
            *self.errors.entry(k.clone()).or_default() += v;
        }
    }

    /// The `p`-th percentile latency, ms.
    pub fn percentile_ms(&mut self, p: f64) -> f64 {
        self.latencies.sort_unstable();
        super::common::percentile(&self.latencies, p) as f64 / 1000.0
    }

    /// The `p`-th percentile of Kith's own time, ms: `None` when no answer
    /// carried it.
    #[allow(
        dead_code,
        reason = "the account move bench reports it; the suite does not"
    )]
    pub fn server_percentile_ms(&self, p: f64) -> Option<f64> {
        let mut kith: Vec<u64> = self.timings.iter().map(|t| t.kith_us).collect();
        kith.sort_unstable();
        (!kith.is_empty()).then(|| super::common::percentile(&kith, p) as f64 / 1000.0)
    }
}

/// The cause of failure of one answer, or `None` when it succeeded.
pub fn failure(status: u16, body: &[u8]) -> Option<String> {
    if status != 200 {
        return Some(format!("HTTP {status}"));
    }
    find(body, b"\"errors\"")?;
    let text = String::from_utf8_lossy(body);
    let code = text
        .split("\"code\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or("ERROR");
    Some(code.to_owned())
}

/// Sends `call`, opening the connection if need be: `Ok` with the answer's
/// `Server-Timing` (when it carried one), or the cause of its failure.
async fn one(
    conn: &mut Option<Conn>,
    addr: SocketAddr,
    call: &Call,
) -> Result<Option<Timing>, String> {
    if conn.is_none() {
        *conn = Some(
            Conn::open(addr)
                .await
                .map_err(|e| format!("connect: {e}"))?,
        );
    }
    let c = conn.as_mut().expect("opened");
    match c
        .send("POST", "/graphql", call.token.as_deref(), &call.body)
        .await
    {
        Ok((status, body)) => failure(status, &body).map_or(Ok(c.timing), Err),
        Err(e) => {
            *conn = None;
            Err(format!("io: {}", e.kind()))
        }
    }
}

/// `clients` connections, each sending its next request as soon as the last
/// is answered, for `duration` (or until `limit` requests were sent).
pub async fn closed_loop(
    addr: SocketAddr,
    clients: usize,
    duration: Duration,
    limit: Option<u64>,
    make: MakeCall,
) -> Outcome {
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + duration;
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let (make, next) = (make.clone(), next.clone());
        workers.spawn(async move {
            let mut out = Outcome::default();
            let mut conn = None;
            while Instant::now() < deadline {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if limit.is_some_and(|l| i >= l) {
                    break;
                }
                let call = make(i);
                let sent = Instant::now();
                match one(&mut conn, addr, &call).await {
                    Ok(timing) => {
                        out.latencies.push(sent.elapsed().as_micros() as u64);
                        out.record(timing);
                    }
                    Err(cause) => *out.errors.entry(cause).or_default() += 1,
                }
            }
            out
        });
    }
    let mut total = Outcome::default();
    while let Some(done) = workers.join_next().await {
        total.merge(&done.expect("client"));
    }
    total.elapsed = started.elapsed();
    total
}

/// Requests at a fixed `rate` for `duration`, each timed from when it was
/// due (not from when a connection was free), so that a stall shows in the
/// latencies instead of quietly lowering the rate. At most `connections`
/// are in flight, over connections opened before the first request.
pub async fn open_loop(
    addr: SocketAddr,
    rate: f64,
    duration: Duration,
    connections: usize,
    make: MakeCall,
) -> Outcome {
    let total = (rate * duration.as_secs_f64()) as u64;
    open_loop_while(addr, rate, connections, make, |i| i < total).await
}

/// The same as [`open_loop`], for as long as `more(i)` holds of the next
/// request `i`: one set of connections throughout, so that a long phase
/// read in parts does not open new ones (and time their handshakes) at
/// each part.
pub async fn open_loop_while(
    addr: SocketAddr,
    rate: f64,
    connections: usize,
    make: MakeCall,
    more: impl Fn(u64) -> bool,
) -> Outcome {
    // The connections are opened before the clock starts: a phase times
    // requests, not handshakes (one that breaks is opened again, timed).
    let (pool_tx, pool_rx) = async_channel(connections);
    for _ in 0..connections {
        pool_tx
            .send(Conn::open(addr).await.ok())
            .await
            .expect("pool");
    }
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in (0..).take_while(|i| more(*i)) {
        let due = started + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(due.into()).await;
        // A condition that turned false while waiting sends nothing more.
        if !more(i) {
            break;
        }
        let (make, pool_tx, pool_rx) = (make.clone(), pool_tx.clone(), pool_rx.clone());
        tasks.spawn(async move {
            let mut conn: Option<Conn> = pool_rx.lock().await.recv().await.expect("pool");
            let call = make(i);
            let result = one(&mut conn, addr, &call).await;
            let took = due.elapsed().as_micros() as u64;
            let _ = pool_tx.send(conn).await;
            result.map(|timing| (took, timing))
        });
    }
    let mut out = Outcome::default();
    while let Some(done) = tasks.join_next().await {
        match done.expect("request") {
            Ok((us, timing)) => {
                out.latencies.push(us);
                out.record(timing);
            }
            Err(cause) => *out.errors.entry(cause).or_default() += 1,
        }
    }
    out.elapsed = started.elapsed();
    out
}

type PoolRx = Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<Option<Conn>>>>;

fn async_channel(n: usize) -> (tokio::sync::mpsc::Sender<Option<Conn>>, PoolRx) {
    let (tx, rx) = tokio::sync::mpsc::channel(n);
    (tx, Arc::new(tokio::sync::Mutex::new(rx)))
}
