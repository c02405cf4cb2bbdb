//! A closed-loop connection's byte stream: plain TCP, or TLS (rustls, driven by hand over the
//! non-blocking socket, as rustls' own mio examples do).

use std::io::{self, ErrorKind, Read, Write};
use std::sync::Arc;

use mio::net::TcpStream;
use rustls::pki_types::ServerName;

/// How the closed loop reaches the server.
#[derive(Debug, Clone)]
pub enum Transport {
    /// Plain HTTP/1.1 on keep-alive connections.
    Plain,
    /// HTTP/1.1 over TLS.
    Tls(TlsTransport),
}

/// TLS: the client settings, the name to verify, and whether each request gets its own
/// connection (and so its own handshake).
#[derive(Debug, Clone)]
pub struct TlsTransport {
    /// rustls' client settings: the roots, and resumption on or off.
    pub config: Arc<rustls::ClientConfig>,
    /// The server's name, sent by SNI and verified.
    pub name: ServerName<'static>,
    /// A new connection for every request: a handshake each (resumed when `config` keeps
    /// sessions), instead of keep-alive.
    pub per_request: bool,
}

/// One connection's stream.
pub(super) enum Stream {
    Plain(TcpStream),
    Tls(TcpStream, Box<rustls::ClientConnection>),
}

impl Stream {
    /// `socket`, and a TLS client on it when `transport` says so.
    pub(super) fn new(socket: TcpStream, transport: &Transport) -> io::Result<Self> {
        Ok(match transport {
            Transport::Plain => Self::Plain(socket),
            Transport::Tls(tls) => {
                let client = rustls::ClientConnection::new(tls.config.clone(), tls.name.clone())
                    .map_err(io::Error::other)?;
                Self::Tls(socket, Box::new(client))
            }
        })
    }

    /// The socket, to register with the poll.
    pub(super) fn socket(&mut self) -> &mut TcpStream {
        match self {
            Self::Plain(socket) | Self::Tls(socket, _) => socket,
        }
    }

    /// Writes from `bytes` what the socket takes now (TLS: all of it, encrypted into rustls'
    /// buffer, then as much as the socket takes). Returns how many bytes of `bytes` went.
    pub(super) fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Self::Plain(socket) => socket.write(bytes),
            Self::Tls(_, client) => {
                let n = client.writer().write(bytes)?;
                self.flush()?;
                Ok(n)
            }
        }
    }

    /// Sends what TLS has waiting (records, handshake messages) as far as the socket takes.
    pub(super) fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Plain(_) => Ok(()),
            Self::Tls(socket, client) => flush_tls(socket, client),
        }
    }

    /// Reads response bytes: `Ok(0)` when the server closed, `WouldBlock` when none are
    /// there yet.
    pub(super) fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (socket, client) = match self {
            Self::Plain(socket) => return socket.read(buf),
            Self::Tls(socket, client) => (socket, client),
        };
        loop {
            match client.reader().read(buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                done => return done,
            }
            if client.read_tls(socket)? == 0 {
                return Ok(0);
            }
            client.process_new_packets().map_err(io::Error::other)?;
            flush_tls(socket, client)?;
        }
    }
}

/// Writes TLS records until rustls has none left or the socket is full.
fn flush_tls(socket: &mut TcpStream, client: &mut rustls::ClientConnection) -> io::Result<()> {
    while client.wants_write() {
        match client.write_tls(socket) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
