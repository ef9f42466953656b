//! Users' password hashes in the node's `/etc/shadow` (upstream `SetPasswordHash`, which runs
//! `usermod -p`): each user of the config gets its `passwordHash`, or `*` (no password login)
//! without one. A user the new config no longer names gets `*` too, where upstream writes an empty
//! field, which lets the user log in without a password wherever PAM allows empty passwords.
//!
//! The file is edited in place of `usermod`: only the second field of the named users' lines
//! changes, the rest stays byte for byte, and the write goes through the update's journal like
//! any file, so a failed update restores it. A user without a line is left alone, as upstream
//! leaves a node without the core user.

use std::fs;
use std::os::unix::fs::MetadataExt as _;

use anyhow::Context as _;
use fn_error_context::context;

use crate::fsutil::Fs;

pub const SHADOW_PATH: &str = "/etc/shadow";
/// The hash of a user without a password: no password matches it.
pub const NO_PASSWORD: &str = "*";

/// The `(user, hash)` pairs an update from `old` to `new` users sets.
pub fn password_hashes(
    old: &[mco_ignition::v3::PasswdUser],
    new: &[mco_ignition::v3::PasswdUser],
) -> Vec<(String, String)> {
    let configured = new.iter().map(|u| {
        let hash = u.password_hash.as_deref().filter(|h| !h.is_empty()).unwrap_or(NO_PASSWORD);
        (u.name.clone(), hash.to_string())
    });
    let dropped =
        old.iter().filter(|o| !new.iter().any(|u| u.name == o.name)).map(|o| (o.name.clone(), NO_PASSWORD.to_string()));
    configured.chain(dropped).collect()
}

/// Why a hash cannot go into a shadow line (it would split the line or its fields), if it cannot.
pub fn unusable_hash(hash: &str) -> Option<&'static str> {
    if hash.chars().any(char::is_control) {
        Some("contains a control character")
    } else if hash.contains(':') {
        Some("contains ':'")
    } else {
        None
    }
}

/// `shadow` with the hashes set, and the users it has no line for; `None` when nothing changes.
pub fn with_hashes<'a>(shadow: &str, hashes: &'a [(String, String)]) -> (Option<String>, Vec<&'a str>) {
    let mut changed = false;
    let mut found = vec![false; hashes.len()];
    let lines: Vec<String> = shadow
        .split_inclusive('\n')
        .map(|line| {
            let mut fields: Vec<&str> = line.splitn(3, ':').collect();
            let Some(i) = hashes.iter().position(|(user, _)| fields.len() == 3 && fields[0] == user) else {
                return line.to_string();
            };
            found[i] = true;
            if fields[1] == hashes[i].1 {
                return line.to_string();
            }
            changed = true;
            fields[1] = &hashes[i].1;
            fields.join(":")
        })
        .collect();
    let missing = hashes.iter().zip(found).filter(|(_, found)| !found).map(|((user, _), _)| user.as_str()).collect();
    (changed.then(|| lines.concat()), missing)
}

/// Sets the users' hashes in the node's shadow file (mode and owner kept).
#[context("Setting password hashes in {SHADOW_PATH}")]
pub fn set_password_hashes(fs: &Fs<'_>, hashes: &[(String, String)]) -> anyhow::Result<()> {
    let path = fs.host(SHADOW_PATH)?;
    let shadow = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let (updated, missing) = with_hashes(&shadow, hashes);
    for user in missing {
        tracing::info!("user {user} does not exist, and creating users is not supported, so ignoring its password");
    }
    let Some(updated) = updated else { return Ok(()) };
    let meta = fs::metadata(&path).with_context(|| format!("reading {}", path.display()))?;
    fs.write_atomic(&path, updated.as_bytes(), meta.mode() & 0o7777, Some((meta.uid(), meta.gid())))?;
    tracing::info!("Password has been configured");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mco_ignition::v3::PasswdUser;

    fn user(name: &str, hash: Option<&str>) -> PasswdUser {
        PasswdUser { name: name.into(), password_hash: hash.map(str::to_string), ..Default::default() }
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(u, h)| (u.to_string(), h.to_string())).collect()
    }

    #[test]
    fn each_configured_user_gets_its_hash_or_none_and_a_dropped_user_none() {
        type Case = (&'static str, Vec<PasswdUser>, Vec<PasswdUser>, Vec<(String, String)>);
        let cases: [Case; 5] = [
            ("a hash", vec![], vec![user("core", Some("$6$x"))], pairs(&[("core", "$6$x")])),
            ("no hash", vec![], vec![user("core", None)], pairs(&[("core", "*")])),
            ("an empty hash", vec![user("core", Some("$6$x"))], vec![user("core", Some(""))], pairs(&[("core", "*")])),
            ("the user dropped", vec![user("core", Some("$6$x"))], vec![], pairs(&[("core", "*")])),
            ("no users", vec![], vec![], vec![]),
        ];
        for (case, old, new, want) in cases {
            assert_eq!(password_hashes(&old, &new), want, "{case}");
        }
    }

    #[test]
    fn only_the_named_users_hash_field_changes() {
        let shadow = "root:*:19000:0:99999:7:::\ncore:!:19000:0:99999:7:::\nodd line\ncorey:x:1::::::";
        let hashes = pairs(&[("core", "$6$salt$abc"), ("ghost", "*")]);
        let (updated, missing) = with_hashes(shadow, &hashes);
        assert_eq!(
            updated.as_deref(),
            Some("root:*:19000:0:99999:7:::\ncore:$6$salt$abc:19000:0:99999:7:::\nodd line\ncorey:x:1::::::")
        );
        assert_eq!(missing, ["ghost"]);
        let (unchanged, _) = with_hashes(&updated.unwrap(), &hashes);
        assert_eq!(unchanged, None, "already set: nothing to write");
    }

    #[test]
    fn hashes_that_would_break_the_file_are_named() {
        assert_eq!(unusable_hash("$6$salt$abc./"), None);
        assert_eq!(unusable_hash("a:b"), Some("contains ':'"));
        assert_eq!(unusable_hash("a\nroot::0:0:::::"), Some("contains a control character"));
    }
}
