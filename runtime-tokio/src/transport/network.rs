//! The seam between the transport and its sockets. Production uses [`Tcp`]; a test can bring
//! any stream network (the runtime's own tests plug in turmoil's simulated TCP, which runs a
//! whole cluster on one deterministic clock). Everything above the seam (handshake, framing,
//! lanes, reconnects) is the same code in both.

use std::io;
use std::net::SocketAddr;

use futures_util::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite};

/// A byte stream between two members.
pub trait Connection: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T> Connection for T where T: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

/// A connection of whichever network the node runs on.
pub type BoxConnection = Box<dyn Connection>;

/// How the transport dials and listens.
pub trait Network: Send + Sync + 'static {
    /// Opens a connection to a member's advertised address (`host:port`).
    fn connect(&self, address: &str) -> BoxFuture<'static, io::Result<BoxConnection>>;

    /// Listens on `address` (`host:port`; port 0 picks a free one where the network can).
    fn bind(&self, address: &str) -> BoxFuture<'static, io::Result<Box<dyn Listener>>>;
}

/// A bound listener.
pub trait Listener: Send + 'static {
    /// The address it is bound to (with the port picked for port 0).
    fn local_addr(&self) -> io::Result<SocketAddr>;

    /// The next accepted connection and where it comes from.
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxConnection, SocketAddr)>>;
}

/// Real TCP through tokio, with Nagle's algorithm off: frames are already batched per flush.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tcp;

impl Network for Tcp {
    fn connect(&self, address: &str) -> BoxFuture<'static, io::Result<BoxConnection>> {
        let address = address.to_owned();
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect(address).await?;
            let _ = stream.set_nodelay(true);
            Ok(Box::new(stream) as BoxConnection)
        })
    }

    fn bind(&self, address: &str) -> BoxFuture<'static, io::Result<Box<dyn Listener>>> {
        let address = address.to_owned();
        Box::pin(async move {
            let listener = tokio::net::TcpListener::bind(address).await?;
            Ok(Box::new(TcpAcceptor(listener)) as Box<dyn Listener>)
        })
    }
}

/// [`Tcp`]'s listener.
struct TcpAcceptor(tokio::net::TcpListener);

impl Listener for TcpAcceptor {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }

    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxConnection, SocketAddr)>> {
        Box::pin(async move {
            let (stream, from) = self.0.accept().await?;
            let _ = stream.set_nodelay(true);
            Ok((Box::new(stream) as BoxConnection, from))
        })
    }
}
