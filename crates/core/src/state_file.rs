//! Writing the plugins' state files (StateSaveLocation) so that a crash, a full disk or
//! a second writer never leaves half a file, and nobody but slurmctld's user reads them.
//!
//! Every state file holds users' job names and run times, which Slurm only shows a
//! user for their own jobs (`PrivateData`): so files are created mode 0600, as Slurm's
//! own state files are.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Replaces `path` with `bytes` atomically: written to a temporary file beside it
/// (mode 0600), synced, renamed over it, and the directory synced, so that after a
/// crash the file is either the old one or the new one.
///
/// Refuses anything but a regular file or nothing at `path`: a state location that
/// resolves to a device (`/dev/null`) or a directory must never be renamed over.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_mode(path, bytes, 0o600)
}

/// [`write_atomic`] with the file's permission bits: for a file meant to be read by
/// others (the published status, [`crate::status`]), not for state.
pub fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{} is not a regular file; not replacing it", path.display()),
            ))
        }
        _ => {}
    }
    let tmp = temp_beside(path);
    let written = (|| {
        let mut f = create_with_mode(&tmp, mode)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written.and_then(|_| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // The rename is durable once the directory is; not every file system allows it.
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

/// [`write_atomic`] of `value` as JSON, errors naming the file.
pub fn write_json<T: serde::Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), String> {
    let json = serde_json::to_vec(value).map_err(|e| format!("{}: {e}", path.display()))?;
    write_atomic(path, &json).map_err(|e| format!("{}: {e}", path.display()))
}

/// Moves a state file its owner cannot read (corrupt, truncated by a full disk, of a newer
/// format) to `<name>.unreadable` beside it, replacing an older one, so that the owner's
/// next save does not destroy what an admin may want to inspect or restore. Returns `why`
/// followed by where the file went, for the owner to log with what it does instead. Only
/// the plugin that writes a file sets it aside; readers just fall back.
pub fn set_aside(path: &Path, why: &str) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let kept = path.with_file_name(format!("{name}.unreadable"));
    match std::fs::rename(path, &kept) {
        Ok(()) => format!("{why}; the file is kept as {}", kept.display()),
        Err(e) => format!("{why}; could not move {} aside ({e})", path.display()),
    }
}

/// `<dir>/.<name>.new`: hidden, and one name per file so a leftover is overwritten, not piled up.
fn temp_beside(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.new"))
}

/// Creates `path` with exactly `mode` (set again after creation: slurmctld's umask
/// must not make a file meant for readers private, nor a private one readable).
#[cfg(unix)]
fn create_with_mode(path: &Path, mode: u32) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(mode & 0o600).open(path)?;
    f.set_permissions(std::fs::Permissions::from_mode(mode))?;
    Ok(f)
}

#[cfg(not(unix))]
fn create_with_mode(path: &Path, _mode: u32) -> std::io::Result<std::fs::File> {
    std::fs::File::create(path)
}

#[cfg(test)]
mod tests {
    use super::{write_atomic, write_atomic_mode};

    #[test]
    fn replaces_the_file_whole_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        }
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 1, "no temporary file left: {left:?}");
    }

    #[test]
    #[cfg(unix)]
    fn a_file_meant_for_readers_gets_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("status.json");
        write_atomic_mode(&p, b"{}", 0o644).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o644);
        write_atomic_mode(&p, b"{}", 0o600).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn an_unreadable_file_is_kept_aside_and_the_sentence_says_where() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("history.json");
        std::fs::write(&p, b"{ trunc").unwrap();
        let line = super::set_aside(&p, "history.json: not JSON");
        let kept = dir.path().join("history.json.unreadable");
        assert_eq!(line, format!("history.json: not JSON; the file is kept as {}", kept.display()));
        assert_eq!(std::fs::read(&kept).unwrap(), b"{ trunc");
        assert!(!p.exists());
        // A second bad file replaces the first kept one; a missing file is said so.
        std::fs::write(&p, b"[").unwrap();
        super::set_aside(&p, "bad");
        assert_eq!(std::fs::read(&kept).unwrap(), b"[");
        assert!(super::set_aside(&p, "bad").contains("could not move"));
    }

    #[test]
    fn never_renames_over_a_device_or_a_directory() {
        let err = write_atomic(std::path::Path::new("/dev/null"), b"x").unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        assert!(write_atomic(dir.path(), b"x").is_err());
        assert!(dir.path().is_dir());
    }
}
