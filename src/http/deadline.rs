//! A write deadline on every connection: a client that stops reading (its
//! socket's buffers full, every write waiting) is dropped once a write has
//! waited its deadline, so it cannot hold what its answer holds — an
//! export slot, a PostgreSQL connection between batches, a WebSocket's
//! place — for as long as it likes. A client that reads slowly but reads
//! is never dropped: the deadline (`KITH_WRITE_TIMEOUT_SECS`) starts again
//! at each write that goes through.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// A listener whose connections carry a write deadline.
pub(super) struct Deadlined<L> {
    inner: L,
    deadline: Duration,
}

impl<L> Deadlined<L> {
    pub(super) fn new(inner: L, deadline: Duration) -> Self {
        Self { inner, deadline }
    }
}

impl<L: Listener> Listener for Deadlined<L> {
    type Io = WriteDeadline<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (io, addr) = self.inner.accept().await;
        (WriteDeadline::new(io, self.deadline), addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// An IO whose writes fail with `TimedOut` once one has waited past its
/// deadline.
pub(super) struct WriteDeadline<T> {
    inner: T,
    deadline: Duration,
    /// Armed while a write (or flush) waits.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<T> WriteDeadline<T> {
    fn new(inner: T, deadline: Duration) -> Self {
        Self {
            inner,
            deadline,
            timer: None,
        }
    }

    /// The waiting write's answer: the inner one when ready (the deadline
    /// starts again next time), else an error once the deadline passed.
    fn watch<R>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if poll.is_ready() {
            self.timer = None;
            return poll;
        }
        let deadline = self.deadline;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(deadline)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteDeadline<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt as _;

    #[tokio::test]
    async fn a_write_that_waits_past_its_deadline_fails() {
        // A pipe whose reader never reads: its buffer fills, writes wait.
        let (writer, _reader) = tokio::io::duplex(64);
        let mut io = WriteDeadline::new(writer, Duration::from_millis(100));
        io.write_all(&[0; 64]).await.unwrap();
        let err = io.write_all(&[0; 64]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test]
    async fn a_reader_that_keeps_reading_is_kept() {
        use tokio::io::AsyncReadExt as _;
        let (writer, mut reader) = tokio::io::duplex(64);
        let mut io = WriteDeadline::new(writer, Duration::from_millis(500));
        let read = tokio::spawn(async move {
            let mut buf = [0; 64];
            let mut total = 0;
            while total < 64 * 20 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                total += reader.read(&mut buf).await.unwrap();
            }
            total
        });
        for _ in 0..20 {
            io.write_all(&[0; 64]).await.unwrap();
        }
        drop(io);
        assert_eq!(read.await.unwrap(), 64 * 20);
    }
}
