//! The `kith` binary: the global allocator, then the command line
//! ([`kith::cli`]).

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    kith::cli::main().await
}

/// mimalloc instead of glibc's allocator: a request allocates and frees many
/// small objects across threads (parsed documents, JSON values, futures), and
/// glibc's `malloc`/`free` took a seventh of the CPU in a profile. Set here,
/// in the binary (and in the benches), not in the library.
#[cfg(not(feature = "jemalloc"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// jemalloc instead, to compare (`--features jemalloc`).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
