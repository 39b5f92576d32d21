//! An etcd server of a test's own: one member, a data directory of its own, free loopback
//! ports for clients and peers (nothing listens beyond 127.0.0.1).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use shoal::store::{EtcdLeaseStore, LeaseStore};

use super::postgres::free_port;
use super::scratch;

/// An etcd server of this test's own, stopped and deleted when dropped.
pub(crate) struct EtcdServer {
    dir: PathBuf,
    client_port: u16,
    etcd: Child,
}

impl EtcdServer {
    /// Starts a one-member etcd; waits until it listens.
    pub(crate) fn start() -> Self {
        let (client_port, peer_port) = (free_port(), free_port());
        let dir = scratch(&format!("etcd-{client_port}"));
        let client_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let log = std::fs::File::create(dir.join("etcd.log")).unwrap();
        let etcd = Command::new("etcd")
            .arg("--name=shoal-test")
            .arg(format!("--data-dir={}", dir.join("data").display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=shoal-test={peer_url}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect(
                "etcd is not installed: apt-get install etcd-server (.ci/run does); \
                 the etcd client also needs protoc (protobuf-compiler) to build",
            );
        let server = Self {
            dir,
            client_port,
            etcd,
        };
        server.wait_ready();
        server
    }

    /// Where clients reach it.
    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// A lease store on this server, once it answers (it listens while still electing itself).
    pub(crate) async fn connect(&self) -> EtcdLeaseStore {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let endpoints = [self.endpoint()];
            let connected = EtcdLeaseStore::connect(&endpoints, Duration::from_secs(2));
            // A probe lease: a store that grants one has a leader.
            let error = match connected.await {
                Ok(store) => match store
                    .acquire("probe", "probe", Duration::from_secs(1))
                    .await
                {
                    Ok(_) => return store,
                    Err(error) => error,
                },
                Err(error) => error,
            };
            assert!(
                Instant::now() < deadline,
                "etcd did not answer within 30 s: {error}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.client_port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "etcd did not listen within 30 s: {}",
                std::fs::read_to_string(self.dir.join("etcd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        let _ = self.etcd.kill();
        let _ = self.etcd.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
