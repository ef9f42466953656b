//! Go's notion of an "empty" value, which decides what `omitempty` drops.
//!
//! The original serializes Ignition configs with `github.com/clarketm/json`, a fork of
//! `encoding/json` whose `omitempty` also drops structs whose fields are all empty. Rendered
//! config names hash those bytes, so our types must omit exactly the same fields.

/// A value that Go's `omitempty` (clarketm flavour) would leave out.
pub trait GoEmpty {
    fn is_go_empty(&self) -> bool;
}

impl<T> GoEmpty for Option<T> {
    fn is_go_empty(&self) -> bool {
        self.is_none()
    }
}

impl<T> GoEmpty for Vec<T> {
    fn is_go_empty(&self) -> bool {
        self.is_empty()
    }
}

impl GoEmpty for String {
    fn is_go_empty(&self) -> bool {
        self.is_empty()
    }
}

impl GoEmpty for bool {
    fn is_go_empty(&self) -> bool {
        !*self
    }
}

impl GoEmpty for i64 {
    fn is_go_empty(&self) -> bool {
        *self == 0
    }
}

/// Declares a struct mirroring a Go Ignition type: fields in Go declaration order (which is the
/// JSON order), with `GoEmpty` true when every field is empty, as clarketm/json decides.
macro_rules! go_struct {
    ($(#[$meta:meta])* pub struct $name:ident { $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty, )* }) => {
        #[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        $(#[$meta])*
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $crate::goempty::GoEmpty for $name {
            fn is_go_empty(&self) -> bool {
                true $( && $crate::goempty::GoEmpty::is_go_empty(&self.$field) )*
            }
        }
    };
}

pub(crate) use go_struct;
