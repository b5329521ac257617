//! The relay agent's socket: client messages relayed by the engine go out to the DHCP servers
//! from here, and the servers' answers (sent to `giaddr`, port 67) come back in and are handed
//! to the engine task. Nothing here interprets DHCP; that is `core::relay`.

pub mod config;

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use crate::core::relay::ToServer;

/// A datagram from a server.
#[derive(Debug)]
pub struct ServerDatagram {
    pub from: SocketAddrV4,
    pub payload: Vec<u8>,
    /// Datagrams dropped since the one before this, the engine task being too busy to take
    /// them (counted when this one is taken: the receiving task has no counter of its own).
    pub dropped_before: u64,
}

/// The counter of [`ServerDatagram::dropped_before`].
pub const DROPPED_BUSY: &str = "relay: server datagram dropped, engine busy";

/// The engine task's ends of the relay socket.
#[derive(Debug)]
pub struct RelayLink {
    pub rx: mpsc::Receiver<ServerDatagram>,
    pub tx: mpsc::UnboundedSender<ToServer>,
    pub local: SocketAddr,
}

#[derive(Debug, thiserror::Error)]
pub enum RelayIoError {
    #[error("relay.listen {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// At most one warning per this interval per kind (a flood must not flood the log).
const WARN_EVERY: Duration = Duration::from_secs(5);

/// Bind `listen` and start the receive and send loops.
pub async fn start(listen: SocketAddr) -> Result<RelayLink, RelayIoError> {
    let bind_err = |source| RelayIoError::Bind {
        addr: listen,
        source,
    };
    let sock = Arc::new(UdpSocket::bind(listen).await.map_err(bind_err)?);
    let local = sock.local_addr().map_err(bind_err)?;
    let (in_tx, rx) = mpsc::channel(8192);
    let (tx, mut out_rx) = mpsc::unbounded_channel::<ToServer>();
    let recv_sock = Arc::clone(&sock);
    tokio::spawn(async move {
        // Larger than any DHCP message a server sends over an Ethernet MTU.
        let mut buf = vec![0u8; 4096];
        let mut warned: Option<Instant> = None;
        let mut dropped = 0;
        loop {
            let (n, from) = match recv_sock.recv_from(&mut buf).await {
                Ok(x) => x,
                Err(e) => {
                    warn_limited(&mut warned, || tracing::warn!("relay socket: {e}"));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            // The socket is bound to an IPv4 address (relay.listen), so every sender is one.
            let SocketAddr::V4(from) = from else { continue };
            let d = ServerDatagram {
                from,
                payload: buf[..n].to_vec(),
                dropped_before: dropped,
            };
            match in_tx.try_send(d) {
                Ok(()) => dropped = 0,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    dropped += 1;
                    warn_limited(&mut warned, || {
                        tracing::warn!("relay: engine busy, server datagrams dropped")
                    })
                }
                Err(mpsc::error::TrySendError::Closed(_)) => return,
            }
        }
    });
    tokio::spawn(async move {
        let mut warned: Option<Instant> = None;
        while let Some(m) = out_rx.recv().await {
            if let Err(e) = sock.send_to(&m.payload, m.server).await {
                warn_limited(
                    &mut warned,
                    || tracing::warn!(server = %m.server, "relay send: {e}"),
                );
            }
        }
    });
    Ok(RelayLink { rx, tx, local })
}

fn warn_limited(last: &mut Option<Instant>, f: impl FnOnce()) {
    if last.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
        *last = Some(Instant::now());
        f();
    }
}

/// The next server datagram, or never when not relaying (for `tokio::select!`).
pub async fn recv(link: &mut Option<RelayLink>) -> Option<ServerDatagram> {
    match link {
        Some(l) => l.rx.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn datagrams_go_out_and_answers_come_back() {
        let link = start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let SocketAddr::V4(server_addr) = server.local_addr().unwrap() else {
            panic!("v4")
        };
        link.tx
            .send(ToServer {
                server: server_addr,
                payload: b"discover".to_vec(),
            })
            .unwrap();
        let mut buf = [0u8; 64];
        let (n, from) = server.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"discover");
        assert_eq!(from, link.local);
        server.send_to(b"offer", from).await.unwrap();
        let mut some = Some(link);
        let d = tokio::time::timeout(Duration::from_secs(5), recv(&mut some))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((d.from, d.payload.as_slice()), (server_addr, &b"offer"[..]));
    }

    #[tokio::test]
    async fn a_taken_port_is_an_error_naming_the_setting() {
        let held = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = held.local_addr().unwrap();
        let e = start(addr).await.unwrap_err();
        assert!(e.to_string().starts_with("relay.listen"), "{e}");
    }
}
