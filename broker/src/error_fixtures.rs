//! One example of each foreign error a `BrokerError` variant carries (an
//! I/O error, a JSON error, a cancelled blocking task, no runtime), for
//! the tables that name every variant: the broker's `kind()` test and
//! each front-end's code test build their variants from these. Test
//! support only (the `failpoints` feature, which dev-dependencies enable).

/// `text` as a `String`, for the tables' many names.
pub fn s(text: &str) -> String {
    text.to_string()
}

pub fn io() -> std::io::Error {
    std::io::Error::other("boom")
}

pub fn json_error() -> serde_json::Error {
    match serde_json::from_str::<u8>("x") {
        Err(e) => e,
        Ok(_) => unreachable!("\"x\" is not a number"),
    }
}

/// A task cancelled before it ran.
pub fn join_error() -> tokio::task::JoinError {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(async {
        let task = tokio::spawn(std::future::pending::<()>());
        task.abort();
        match task.await {
            Err(e) => e,
            Ok(()) => unreachable!("the task was aborted"),
        }
    })
}

/// Outside any runtime.
pub fn no_runtime() -> tokio::runtime::TryCurrentError {
    match tokio::runtime::Handle::try_current() {
        Err(e) => e,
        Ok(_) => unreachable!("called outside a runtime"),
    }
}
