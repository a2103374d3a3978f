//! What the tests that hold readpath against the real kernel need, probed
//! once: root, loop devices and mkfs.ext4 (which `.ci/run` installs, so its
//! absence under CI is a failure, not a skip).

use std::path::Path;
use std::process::Command;

/// Why this machine cannot loop-mount an ext4 image, if it cannot.
pub fn missing() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("root (mounting a loop image)".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("/dev/loop-control (loop devices)".into());
    }
    if Command::new("mkfs.ext4").arg("-V").output().is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "mkfs.ext4 missing under CI: .ci/run installs e2fsprogs"
        );
        return Some("mkfs.ext4 (apt-get install e2fsprogs)".into());
    }
    None
}
