//! Mutual TLS (feature `tls`): a [`Network`] that wraps another in rustls, so every connection
//! is encrypted and both ends prove a certificate chaining to the cluster's CA before the
//! member handshake even starts. The handshake still runs inside (cluster name, shared secret,
//! member identity): TLS proves the machine, the handshake proves the cluster member.
//!
//! The dialer checks that the peer's certificate names the host of the address it dialled
//! (DNS name or IP address). The acceptor runs its side lazily, on the connection's first
//! read or write, so a slow or silent client holds up only its own reader (whose handshake
//! timeout then covers TLS too), never the listener.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures_util::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio_rustls::{Accept, TlsAcceptor, TlsConnector, server};

use super::network::{BoxConnection, Listener, Network};

/// The PEM material of one member.
#[derive(Clone)]
pub struct TlsSettings {
    /// The certificate authorities members' certificates must chain to.
    pub ca_pem: Vec<u8>,
    /// This member's certificate chain, leaf first. The leaf must name the host of the
    /// member's advertised address, and be valid for both server and client use.
    pub cert_pem: Vec<u8>,
    /// The leaf's private key (PKCS#8, PKCS#1 or SEC1).
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("TlsSettings").finish_non_exhaustive()
    }
}

/// Why TLS settings were refused.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM section did not parse, or none was found.
    #[error("{what}: {detail}")]
    Pem {
        /// Which input.
        what: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// rustls refused the material (an unsupported key, a CA it cannot use).
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// `inner` (TCP, or a simulated network) with mutual TLS on every connection.
pub struct MutualTls<N> {
    inner: N,
    connector: TlsConnector,
    acceptor: TlsAcceptor,
}

impl<N: Network> MutualTls<N> {
    /// Checks `settings` and builds both sides' rustls configurations (TLS 1.2 and 1.3, ring).
    pub fn new(inner: N, settings: &TlsSettings) -> Result<Self, TlsError> {
        let certs = CertificateDer::pem_slice_iter(&settings.cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| pem("certificate chain", e))?;
        if certs.is_empty() {
            return Err(pem("certificate chain", "no certificate found"));
        }
        let key = PrivateKeyDer::from_pem_slice(&settings.key_pem).map_err(|e| pem("key", e))?;
        let mut roots = RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(&settings.ca_pem) {
            let ca = ca.map_err(|e| pem("CA", e))?;
            roots.add(ca).map_err(config)?;
        }
        if roots.is_empty() {
            return Err(pem("CA", "no certificate found"));
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(ring::default_provider());
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::clone(&roots), Arc::clone(&provider))
                .build()
                .map_err(config)?;
        let server = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(config)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(config)?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(config)?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)
            .map_err(config)?;
        Ok(Self {
            inner,
            connector: TlsConnector::from(Arc::new(client)),
            acceptor: TlsAcceptor::from(Arc::new(server)),
        })
    }
}

fn pem(what: &'static str, detail: impl ToString) -> TlsError {
    TlsError::Pem {
        what,
        detail: detail.to_string(),
    }
}

fn config(error: impl ToString) -> TlsError {
    TlsError::Config(error.to_string())
}

/// The host part of `host:port` (brackets of an IPv6 literal removed) as a TLS server name.
fn server_name(address: &str) -> io::Result<ServerName<'static>> {
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

impl<N: Network> Network for MutualTls<N> {
    fn connect(&self, address: &str) -> BoxFuture<'static, io::Result<BoxConnection>> {
        let connect = self.inner.connect(address);
        let connector = self.connector.clone();
        let name = server_name(address);
        Box::pin(async move {
            let name = name?;
            let stream = connect.await?;
            let stream = connector.connect(name, stream).await?;
            Ok(Box::new(stream) as BoxConnection)
        })
    }

    fn bind(&self, address: &str) -> BoxFuture<'static, io::Result<Box<dyn Listener>>> {
        let bind = self.inner.bind(address);
        let acceptor = self.acceptor.clone();
        Box::pin(async move {
            let inner = bind.await?;
            Ok(Box::new(TlsListener { inner, acceptor }) as Box<dyn Listener>)
        })
    }
}

/// Accepts through the inner listener; TLS starts on the connection's first use.
struct TlsListener {
    inner: Box<dyn Listener>,
    acceptor: TlsAcceptor,
}

impl Listener for TlsListener {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxConnection, SocketAddr)>> {
        Box::pin(async move {
            let (stream, from) = self.inner.accept().await?;
            let accepting = Accepting::Handshake(Box::new(self.acceptor.accept(stream)));
            Ok((Box::new(accepting) as BoxConnection, from))
        })
    }
}

/// A server-side TLS connection whose handshake runs on first use.
enum Accepting {
    Handshake(Box<Accept<BoxConnection>>),
    Ready(Box<server::TlsStream<BoxConnection>>),
    Failed,
}

impl Accepting {
    fn poll_ready(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<&mut server::TlsStream<BoxConnection>>> {
        if let Self::Handshake(accept) = self {
            match ready!(Pin::new(accept.as_mut()).poll(cx)) {
                Ok(stream) => *self = Self::Ready(Box::new(stream)),
                Err(error) => {
                    *self = Self::Failed;
                    return Poll::Ready(Err(error));
                }
            }
        }
        match self {
            Self::Ready(stream) => Poll::Ready(Ok(stream)),
            _ => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the TLS handshake failed",
            ))),
        }
    }
}

impl AsyncRead for Accepting {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let stream = ready!(self.get_mut().poll_ready(cx))?;
        Pin::new(stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Accepting {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let stream = ready!(self.get_mut().poll_ready(cx))?;
        Pin::new(stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let stream = ready!(self.get_mut().poll_ready(cx))?;
        Pin::new(stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            // Nothing was established: nothing to close politely.
            Self::Handshake(_) | Self::Failed => Poll::Ready(Ok(())),
            Self::Ready(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_come_from_the_host_part() {
        assert_eq!(
            server_name("10.0.0.7:7355").unwrap(),
            ServerName::try_from("10.0.0.7").unwrap()
        );
        assert_eq!(
            server_name("[::1]:7355").unwrap(),
            ServerName::try_from("::1").unwrap()
        );
        assert_eq!(
            server_name("node-3.shop.internal:7355").unwrap(),
            ServerName::try_from("node-3.shop.internal").unwrap()
        );
        assert!(server_name("bad host!:1").is_err());
    }

    #[test]
    fn bad_material_is_a_clear_error() {
        let empty = TlsSettings {
            ca_pem: Vec::new(),
            cert_pem: Vec::new(),
            key_pem: Vec::new(),
        };
        let error = MutualTls::new(super::super::network::Tcp, &empty)
            .err()
            .expect("refused");
        assert!(error.to_string().contains("certificate chain"), "{error}");
        let garbage = TlsSettings {
            cert_pem: b"-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n".to_vec(),
            ..empty
        };
        assert!(MutualTls::new(super::super::network::Tcp, &garbage).is_err());
    }
}
