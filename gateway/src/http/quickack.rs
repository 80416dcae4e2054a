//! No client waits on this server's delayed ACK: [`QuickAck`] wraps an accepted socket
//! and, each time the server finds nothing more to read (it waits on the client), sends
//! the ACK of what it has read at once (`TCP_QUICKACK`, Linux).
//!
//! Why: a client with Nagle's algorithm on (no `TCP_NODELAY`: Python's `http.client`
//! writes a request's head and body with two `send` calls, and many proxies) does not
//! send the body until the head is acknowledged; Linux delays that ACK up to 40 ms on an
//! interactive connection, hoping to carry it on the answer, and the answer waits for the
//! body. Every such request took 44 ms (gateway/benches/RESULTS-nodelay.md). Acknowledging
//! when the server is about to wait costs one `setsockopt` and at most one bare ACK segment
//! per request, and removes the stall. Only a wait that follows new data acknowledges:
//! hyper polls the socket several times per request (while the answer is being made, after
//! it is written), and with nothing read since the last ACK there is nothing to send.
//! The server's own writes do not wait either: accepted sockets get `TCP_NODELAY`
//! ([`crate::http::serve`]).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// An accepted connection that acknowledges received data before waiting for more.
pub struct QuickAck {
    stream: TcpStream,
    /// Data was read since the last ACK this wrapper sent.
    unacked: bool,
}

impl QuickAck {
    pub fn new(stream: TcpStream) -> Self {
        Self {
            stream,
            unacked: false,
        }
    }

    /// Sends any delayed ACK now and leaves the kernel's delayed-ACK ("pingpong") mode
    /// until the next exchange; errors are ignored (a closed socket, another OS).
    fn ack_now(&self) {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let one: libc::c_int = 1;
            // SAFETY: a valid socket descriptor owned by `self.0`, and a pointer to a
            // c_int of the length passed.
            unsafe {
                libc::setsockopt(
                    self.stream.as_raw_fd(),
                    libc::IPPROTO_TCP,
                    libc::TCP_QUICKACK,
                    (&one as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
        }
    }
}

impl AsyncRead for QuickAck {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        match polled {
            Poll::Ready(Ok(())) if buf.filled().len() > before => this.unacked = true,
            Poll::Pending if this.unacked => {
                this.ack_now();
                this.unacked = false;
            }
            _ => {}
        }
        polled
    }
}

impl AsyncWrite for QuickAck {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::{AsRawFd, RawFd};
    use tokio::io::AsyncReadExt;

    fn get(fd: RawFd) -> libc::c_int {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: a valid socket and an out-pointer of the length passed.
        unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_QUICKACK,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            );
        }
        value
    }

    fn clear(fd: RawFd) {
        let zero: libc::c_int = 0;
        // SAFETY: a valid socket and a pointer to a c_int of the length passed.
        unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_QUICKACK,
                (&zero as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }

    /// Reads pass through, and a read that has to wait leaves the socket in quick-ACK
    /// mode (as the kernel reports it).
    #[tokio::test]
    async fn a_read_that_waits_acknowledges_at_once() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let client = std::thread::spawn(move || {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.write_all(b"head").unwrap();
            wait.recv().unwrap();
            c.write_all(b"body").unwrap();
            c
        });
        let (stream, _) = listener.accept().await.unwrap();
        let fd = stream.as_raw_fd();
        let mut conn = QuickAck::new(stream);
        let mut head = [0u8; 4];
        conn.read_exact(&mut head).await.unwrap();
        assert_eq!(&head, b"head");
        clear(fd);
        assert_eq!(
            get(fd),
            0,
            "delayed-ACK mode, as on an interactive connection"
        );
        let mut body = [0u8; 4];
        let read = conn.read_exact(&mut body);
        tokio::pin!(read);
        // The body has not been sent: the read waits, and the wrapper acknowledges first.
        assert!(futures::poll!(read.as_mut()).is_pending());
        assert_eq!(get(fd), 1, "quick-ACK mode while waiting on the client");
        go.send(()).unwrap();
        read.await.unwrap();
        assert_eq!(&body, b"body");
        drop(client.join().unwrap());
    }

    /// A wait with nothing read since the last ACK sends none; the next data is
    /// acknowledged again when the read after it waits.
    #[tokio::test]
    async fn only_a_wait_after_new_data_acknowledges() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let client = std::thread::spawn(move || {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.write_all(b"one").unwrap();
            wait.recv().unwrap();
            c.write_all(b"two").unwrap();
            wait.recv().unwrap();
            c
        });
        let (stream, _) = listener.accept().await.unwrap();
        let fd = stream.as_raw_fd();
        let mut conn = QuickAck::new(stream);
        let mut buf = [0u8; 3];
        conn.read_exact(&mut buf).await.unwrap();
        let mut more = [0u8; 3];
        {
            let read = conn.read_exact(&mut more);
            tokio::pin!(read);
            assert!(futures::poll!(read.as_mut()).is_pending());
            assert_eq!(get(fd), 1, "the first wait after `one` acknowledges it");
            clear(fd);
            assert!(futures::poll!(read.as_mut()).is_pending());
            assert_eq!(
                get(fd),
                0,
                "a second wait with nothing new read sends no ACK"
            );
            go.send(()).unwrap();
            read.await.unwrap();
        }
        assert_eq!(&more, b"two");
        clear(fd);
        let read = conn.read_exact(&mut more);
        tokio::pin!(read);
        assert!(futures::poll!(read.as_mut()).is_pending());
        assert_eq!(get(fd), 1, "the wait after `two` acknowledges it");
        go.send(()).unwrap();
        drop(client.join().unwrap());
    }
}
