//! CPU time and memory of the processes on the machine, from `/proc`.

use std::collections::BTreeMap;

/// CPU seconds used so far, by process group.
#[derive(Clone, Debug, Default)]
pub struct Cpu(pub BTreeMap<&'static str, f64>);

/// The groups measured: Kith, PostgreSQL (every backend), Redis, the
/// broker, and this bench (the load generator).
pub const GROUPS: [&str; 5] = ["kith", "postgres", "redis", "broker", "bench"];

fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// `(comm, parent pid, utime + stime in ticks)` of one process.
fn stat(pid: &str) -> Option<(String, String, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text[open + 1..close].to_owned();
    let fields: Vec<&str> = text[close + 2..].split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((comm, fields.get(1)?.to_string(), utime + stime))
}

/// The processes whose parent is `pid`.
pub fn children(pid: u32) -> Vec<u32> {
    let parent = pid.to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| stat(&p.to_string()).is_some_and(|(_, ppid, _)| ppid == parent))
        .collect()
}

/// The measured processes: `(pid, group, CPU ticks so far)` of each.
fn processes(kith_pid: u32) -> Vec<(u32, &'static str, u64)> {
    let me = std::process::id().to_string();
    let kith = kith_pid.to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let pid = entry.file_name().to_string_lossy().to_string();
        let Ok(number) = pid.parse::<u32>() else {
            continue;
        };
        let Some((comm, parent, ticks)) = stat(&pid) else {
            continue;
        };
        // The measured server and its workers (the reference forks some).
        let group = if pid == kith || parent == kith {
            "kith"
        } else if pid == me {
            "bench"
        } else if comm == "postgres" {
            "postgres"
        } else if comm.starts_with("redis-server") {
            "redis"
        } else if comm == "tansu" || comm == "nisshi" {
            "broker"
        } else {
            continue;
        };
        out.push((number, group, ticks));
    }
    out
}

/// CPU seconds of each group now. Processes that ended are not counted (a
/// phase's figure is the difference of two readings of long-lived processes).
pub fn cpu(kith_pid: u32) -> Cpu {
    let hz = ticks_per_second();
    let mut out: BTreeMap<&'static str, f64> = GROUPS.iter().map(|g| (*g, 0.0)).collect();
    for (_, group, ticks) in processes(kith_pid) {
        *out.get_mut(group).expect("group") += ticks as f64 / hz;
    }
    Cpu(out)
}

/// Every thread of each measured process on the CPUs `cpus_of` its group
/// names (a `taskset` list such as `"0"` or `"2-3"`); `None` leaves a group
/// where it is. Processes forked later by a pinned one (PostgreSQL's
/// backends) inherit its CPUs. Whether every pin took.
#[allow(
    dead_code,
    reason = "the account-move bench's, which shares this module"
)]
pub fn pin(kith_pid: u32, cpus_of: impl Fn(&str) -> Option<String>) -> bool {
    // Every process is pinned, even past one that could not be.
    processes(kith_pid)
        .into_iter()
        .filter_map(|(pid, group, _)| Some((pid, cpus_of(group)?)))
        .map(|(pid, cpus)| pin_one(pid, &cpus))
        .filter(|pinned| !pinned)
        .count()
        == 0
}

/// Every thread of process `pid` on `cpus`; whether it took.
#[allow(
    dead_code,
    reason = "the account-move bench's, which shares this module"
)]
pub fn pin_one(pid: u32, cpus: &str) -> bool {
    std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", cpus, &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// CPU seconds process `pid` has used so far (0 once it is gone).
#[allow(
    dead_code,
    reason = "the account-move bench's, which shares this module"
)]
pub fn cpu_of(pid: u32) -> f64 {
    stat(&pid.to_string()).map_or(0.0, |(_, _, ticks)| ticks as f64 / ticks_per_second())
}

impl Cpu {
    /// CPU seconds per group between `earlier` and `self`.
    pub fn since(&self, earlier: &Cpu) -> Cpu {
        Cpu(self
            .0
            .iter()
            .map(|(g, s)| (*g, (s - earlier.0.get(g).copied().unwrap_or(0.0)).max(0.0)))
            .collect())
    }

    /// CPU seconds of `group`.
    pub fn of(&self, group: &str) -> f64 {
        self.0.get(group).copied().unwrap_or(0.0)
    }
}

/// The CPUs this process may run on, as `/proc/self/status` lists them
/// (`0-3`, `2,5-7`), one by one.
#[allow(
    dead_code,
    reason = "the account-move bench's, which shares this module"
)]
pub fn allowed_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let Some(list) = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
    else {
        return Vec::new();
    };
    list.trim()
        .split(',')
        .filter_map(|part| match part.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?..=b.parse().ok()?).collect::<Vec<usize>>()),
            None => Some(vec![part.parse().ok()?]),
        })
        .flatten()
        .collect()
}

/// `(VmRSS, VmHWM)` of `pid` in MiB.
pub fn memory_mib(pid: u32) -> (f64, f64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A `perf record` of one process (sampled at 999 Hz, no call graphs: a
/// flat profile of where the CPU time goes).
pub struct PerfRecord {
    child: std::process::Child,
    data: std::path::PathBuf,
}

/// Starts recording `pid` into `data`, or `None` when `perf` is missing.
pub fn perf_start(pid: u32, data: &std::path::Path) -> Option<PerfRecord> {
    let child = std::process::Command::new("perf")
        .args(["record", "-F", "999", "-p", &pid.to_string(), "-o"])
        .arg(data)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    Some(PerfRecord {
        child,
        data: data.to_owned(),
    })
}

/// Where the CPU time of a profiled process went, by part of the stack.
const CATEGORIES: [(&str, &[&str]); 12] = [
    (
        "allocator (malloc/free)",
        &[
            "mi_", "malloc", "free", "realloc", "calloc", "je_", "jemalloc",
        ],
    ),
    ("GraphQL parsing (pest)", &["pest", "async_graphql_parser"]),
    ("async-graphql execution", &["async_graphql"]),
    ("tokio", &["tokio::"]),
    (
        "hashing",
        &[
            "hashbrown",
            "ahash",
            "siphash",
            "core::hash",
            "Hasher",
            "fxhash",
            "foldhash",
        ],
    ),
    (
        "PostgreSQL client",
        &["tokio_postgres", "postgres_protocol", "diesel"],
    ),
    ("Redis client", &["redis::"]),
    ("JSON", &["serde_json", "serde::"]),
    (
        "HTTP (hyper/axum)",
        &["hyper", "axum", "http::", "httparse", "tower"],
    ),
    ("HMAC/SHA-256 (tokens)", &["hmac", "sha2", "sha256"]),
    (
        "memcpy/memmove/memset",
        &["memcpy", "memmove", "memset", "memcmp"],
    ),
    ("moka caches", &["moka"]),
];

impl PerfRecord {
    /// Stops recording and returns `(category, % of samples)`, kernel first.
    pub fn finish(mut self) -> Vec<(String, f64)> {
        let _ = std::process::Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        let output = std::process::Command::new("perf")
            .args([
                "report",
                "--stdio",
                "--no-children",
                "--sort",
                "dso,sym",
                "-q",
                "-i",
            ])
            .arg(&self.data)
            .output();
        let Ok(output) = output else {
            return Vec::new();
        };
        let text = String::from_utf8_lossy(&output.stdout);
        let mut split: BTreeMap<String, f64> = BTreeMap::new();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let Some(percent) = words
                .next()
                .and_then(|p| p.strip_suffix('%'))
                .and_then(|p| p.parse::<f64>().ok())
            else {
                continue;
            };
            let dso = words.next().unwrap_or("");
            let marker = words.next().unwrap_or("");
            let symbol: String = words.collect::<Vec<_>>().join(" ");
            let category = if marker == "[k]" || dso.contains("kernel") {
                "kernel"
            } else {
                CATEGORIES
                    .iter()
                    .find(|(_, needles)| needles.iter().any(|n| symbol.contains(n)))
                    .map_or("other", |(name, _)| name)
            };
            *split.entry(category.to_owned()).or_default() += percent;
        }
        let mut split: Vec<(String, f64)> = split.into_iter().collect();
        split.sort_by(|a, b| b.1.total_cmp(&a.1));
        split
    }
}
