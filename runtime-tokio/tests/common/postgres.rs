//! A PostgreSQL server of a test's own: initdb in a temporary directory, a free loopback port,
//! as the `postgres` user when run as root.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use shoal::store::PostgresStore;

use super::scratch;

/// A loopback port nobody listens on.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A PostgreSQL server of this test's own, stopped and deleted when dropped.
pub(crate) struct PgServer {
    dir: PathBuf,
    port: u16,
    postmaster: Child,
}

impl PgServer {
    /// Starts a server in a directory of its own; waits until it listens.
    pub(crate) fn start() -> Self {
        let bin = pg_bin_dir();
        let dir = scratch("postgres");
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        // PostgreSQL refuses to run as root: then it runs as the `postgres` user.
        let as_owner = |program: PathBuf| {
            if root {
                let mut command = Command::new("setpriv");
                command
                    .args(["--reuid=postgres", "--regid=postgres", "--init-groups"])
                    .arg(program);
                command
            } else {
                Command::new(program)
            }
        };
        if root {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&dir)
                .status()
                .unwrap();
            assert!(status.success(), "chown of {}", dir.display());
        }
        let data = dir.join("data");
        let initdb = as_owner(bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "shoal", "-A", "trust", "-E", "UTF8", "--no-sync"])
            .output()
            .expect("initdb runs");
        assert!(
            initdb.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&initdb.stderr)
        );
        let port = free_port();
        let log = std::fs::File::create(dir.join("server.log")).unwrap();
        let postmaster = as_owner(bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-k"])
            .arg(&dir)
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("postgres starts");
        let server = Self {
            dir,
            port,
            postmaster,
        };
        server.wait_ready();
        server
    }

    /// Where it listens.
    pub(crate) fn url(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=shoal dbname=postgres",
            self.port
        )
    }

    /// A store on this server, once it accepts connections (it listens while still starting).
    pub(crate) async fn connect(&self) -> PostgresStore {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match PostgresStore::connect(self.url()).await {
                Ok(store) => return store,
                Err(error) => assert!(
                    Instant::now() < deadline,
                    "PostgreSQL did not accept connections within 30 s: {error}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "PostgreSQL did not listen within 30 s: {}",
                std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        // A fast shutdown (SIGINT) lets the backends end and the shared memory go; SIGKILL only
        // if it has not stopped within 10 s.
        let pid = self.postmaster.id().to_string();
        let _ = Command::new("kill").args(["-INT", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !matches!(self.postmaster.try_wait(), Ok(Some(_))) {
            if Instant::now() >= deadline {
                let _ = self.postmaster.kill();
                let _ = self.postmaster.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where the PostgreSQL server programs are: on the `PATH`, or Debian's versioned directory.
fn pg_bin_dir() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .find(|dir| dir.join("initdb").is_file() && dir.join("postgres").is_file())
    });
    let debian = || {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path().join("bin"))
            .filter(|bin| bin.join("initdb").is_file())
            .collect();
        dirs.sort();
        dirs.pop()
    };
    on_path.or_else(debian).expect(
        "PostgreSQL's server programs (initdb, postgres) are not installed: \
         apt-get install postgresql (.ci/run does)",
    )
}
