//! Test seam (feature `failpoints`): an `ObjectStore` wrapper that fails or
//! "crashes" at the k-th write, or is down altogether.
//!
//! Writes are puts, multipart starts and deletes, counted from 1 in the
//! order they reach the store. A crash is the process dying at that
//! write: before it lands ([`Fault::CrashBefore`]) or after it landed with
//! its answer lost ([`Fault::CrashAfter`]); every call after it fails, as a
//! dead process makes none. A test then opens a new `RemoteTier` on the
//! inner store (the restarted process) and retries. A multipart start
//! counts as one write; `CrashAfter` at one behaves as `CrashBefore`.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// What goes wrong at write number `k` (counted from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Write k fails without landing, once; later calls work (a 5xx).
    FailOnce(u64),
    /// The process dies just before write k lands.
    CrashBefore(u64),
    /// Write k lands, then the process dies before it hears so.
    CrashAfter(u64),
}

#[derive(Debug, Default)]
struct State {
    writes: u64,
    plan: Option<Fault>,
    crashed: bool,
    down: bool,
}

/// The wrapper; share it as `Arc<dyn ObjectStore>`.
#[derive(Debug)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    state: Arc<Mutex<State>>,
}

enum After {
    Answer,
    Crash,
}

fn failure(what: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "FaultyStore",
        source: what.to_string().into(),
    }
}

fn state(s: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    s.lock().unwrap_or_else(PoisonError::into_inner)
}

fn check_alive(s: &Mutex<State>) -> Result<()> {
    let s = state(s);
    if s.crashed {
        return Err(failure("the process crashed"));
    }
    if s.down {
        return Err(failure("the store is down"));
    }
    Ok(())
}

fn before_write(s: &Mutex<State>) -> Result<After> {
    check_alive(s)?;
    let mut s = state(s);
    s.writes += 1;
    let k = s.writes;
    match s.plan {
        Some(Fault::FailOnce(n)) if n == k => {
            s.plan = None;
            Err(failure("injected failure"))
        }
        Some(Fault::CrashBefore(n)) if n == k => {
            s.crashed = true;
            Err(failure("crashed before the write"))
        }
        Some(Fault::CrashAfter(n)) if n == k => Ok(After::Crash),
        _ => Ok(After::Answer),
    }
}

fn after_write<T>(s: &Mutex<State>, after: After, outcome: Result<T>) -> Result<T> {
    match after {
        After::Answer => outcome,
        After::Crash => {
            state(s).crashed = true;
            Err(failure("crashed after the write"))
        }
    }
}

impl FaultyStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Arc<FaultyStore> {
        Arc::new(FaultyStore {
            inner,
            state: Arc::default(),
        })
    }

    /// The store under the faults (what a restarted process sees).
    pub fn inner(&self) -> Arc<dyn ObjectStore> {
        self.inner.clone()
    }

    /// Installs a fault, counting writes from now on.
    pub fn plan(&self, fault: Option<Fault>) {
        let mut s = state(&self.state);
        s.plan = fault;
        s.writes = 0;
    }

    /// Writes seen since the last `plan`.
    pub fn writes(&self) -> u64 {
        state(&self.state).writes
    }

    pub fn crashed(&self) -> bool {
        state(&self.state).crashed
    }

    /// Every call fails while down (the store stopped, a network cut).
    pub fn set_down(&self, down: bool) {
        state(&self.state).down = down;
    }

    /// Back to working: no plan, not crashed, not down.
    pub fn heal(&self) {
        *state(&self.state) = State::default();
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let after = before_write(&self.state)?;
        let outcome = self.inner.put_opts(location, payload, opts).await;
        after_write(&self.state, after, outcome)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        if let After::Crash = before_write(&self.state)? {
            state(&self.state).crashed = true;
            return Err(failure("crashed at a multipart start"));
        }
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        check_alive(&self.state)?;
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let st = self.state.clone();
        let inner = self.inner.clone();
        locations
            .then(move |p| {
                let st = st.clone();
                let inner = inner.clone();
                async move {
                    let p = p?;
                    let after = before_write(&st)?;
                    let outcome = inner.delete(&p).await.map(|()| p);
                    after_write(&st, after, outcome)
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        match check_alive(&self.state) {
            Ok(()) => self.inner.list(prefix),
            Err(e) => stream::once(async move { Err(e) }).boxed(),
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        check_alive(&self.state)?;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        let after = before_write(&self.state)?;
        let outcome = self.inner.copy_opts(from, to, options).await;
        after_write(&self.state, after, outcome)
    }
}
