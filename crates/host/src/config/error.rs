//! What a configuration error says: the file, the key, the problem, and where.

use std::fmt;
use std::sync::Arc;

/// A configuration error, naming where it is. When it comes from another error (a file that
/// cannot be read, a key that does not parse), its message is that error's, and its
/// [`source`](std::error::Error::source) is that error's cause, so `edgegate check` and the
/// logs print the whole chain.
#[derive(Debug, Clone)]
pub struct ConfigError {
    /// The file, or a description like `<built-in demo>`.
    pub file: String,
    /// The key path, e.g. `workers.echo.limits.cpu`, when known.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
    /// 1-based line and column, when known.
    pub position: Option<(usize, usize)>,
    /// The error this one reports, whose causes follow it in the chain.
    pub(super) error: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file)?;
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        write!(f, "{}", self.message)?;
        if let Some((line, column)) = self.position {
            write!(f, " (line {line}, column {column})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.as_deref()?.source()
    }
}

impl ConfigError {
    /// A problem at `key`, told in `message`.
    pub(crate) fn at(file: &str, key: impl Into<String>, message: impl fmt::Display) -> Self {
        Self {
            file: file.to_owned(),
            key: Some(key.into()),
            message: message.to_string(),
            position: None,
            error: None,
        }
    }

    /// `error`, found at `key`: its text is the message, its causes follow.
    pub(crate) fn caused(
        file: &str,
        key: impl Into<String>,
        error: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        let error: Arc<dyn std::error::Error + Send + Sync> = Arc::from(error.into());
        Self {
            file: file.to_owned(),
            key: Some(key.into()),
            message: error.to_string(),
            position: None,
            error: Some(error),
        }
    }

    /// One error for several: itself when there is one, else one that lists them all, a line
    /// each (`2 errors:` then `  workers.a.module: …`).
    pub(crate) fn all(file: &str, mut errors: Vec<ConfigError>) -> Self {
        if errors.len() == 1 {
            return errors.remove(0);
        }
        let mut message = format!("{} errors:", errors.len());
        for error in errors {
            message.push_str("\n  ");
            if error.file != file {
                message.push_str(&error.file);
                message.push_str(": ");
            }
            if let Some(key) = &error.key {
                message.push_str(key);
                message.push_str(": ");
            }
            message.push_str(&error.message);
            let mut cause = std::error::Error::source(&error);
            while let Some(error) = cause {
                message.push_str(": ");
                message.push_str(&error.to_string());
                cause = error.source();
            }
        }
        Self { file: file.to_owned(), key: None, message, position: None, error: None }
    }
}

/// A configuration file that cannot be read: the I/O error is its cause.
#[derive(Debug, thiserror::Error)]
#[error("cannot read it")]
pub(super) struct Unreadable(#[source] pub(super) std::io::Error);
