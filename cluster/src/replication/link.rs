//! What a replication connection runs over: plain TCP, or TLS with the
//! nodes' own certificates both ways (docs/CLUSTER.md "Security").
//!
//! The master's side gets its links from the node's listener, which runs
//! the TLS handshake (and checks the replica's certificate) before a
//! frame is read; the replica's side makes its own with [`connect`].
//! Either way the stream code sees only a [`Link`].

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::ClientConfig;

use super::ReplicationError;

/// A byte stream a replication connection runs over.
pub trait Link: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Link for T {}

/// A connection to the master at `address` (`host:port`): TLS with
/// `tls` (the node's client config: its certificate, and the CA the
/// master's must be signed by, for the host it is reached by), else
/// plain TCP. The caller bounds it in time.
pub async fn connect(
    address: &str,
    tls: Option<&Arc<ClientConfig>>,
) -> Result<Box<dyn Link>, ReplicationError> {
    let tcp = TcpStream::connect(address).await?;
    tcp.set_nodelay(true)?;
    let Some(tls) = tls else {
        return Ok(Box::new(tcp));
    };
    let name = server_name(address)?;
    let stream = tokio_rustls::TlsConnector::from(Arc::clone(tls))
        .connect(name, tcp)
        .await?;
    Ok(Box::new(stream))
}

/// The name (or address) the master's certificate must carry: the host
/// of `host:port` (`[v6]:port` too).
fn server_name(address: &str) -> Result<ServerName<'static>, ReplicationError> {
    let host = address
        .rsplit_once(':')
        .map_or(address, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    ServerName::try_from(host.to_owned()).map_err(|e| {
        ReplicationError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("the master's address {address:?} names no host a certificate can carry: {e}"),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_name_is_the_host_of_the_address() {
        let name = |a: &str| server_name(a).map(|n| n.to_str().into_owned()).ok();
        assert_eq!(name("127.0.0.1:9500").as_deref(), Some("127.0.0.1"));
        assert_eq!(name("node1.example:9500").as_deref(), Some("node1.example"));
        assert_eq!(name("[::1]:9500").as_deref(), Some("::1"));
        assert_eq!(name("bad host:1"), None);
    }
}
