//! Admin and commit bodies (every JSON body but produce's): JSON text
//! decoded into the handler's type under one rule serde's derive lacks.
//!
//! Invariant: wherever the target type expects a struct (the body itself,
//! each item of `data`, `offsets`, `configs`, ...), the JSON there is an
//! object. serde's derived `Deserialize` also accepts a sequence for a
//! struct and reads its elements as the fields in declaration order, so
//! `[true]` would be `{"force": true}` and `[["retention.bytes","1","SET"]]`
//! an alter entry; here anything but an object is refused, before the
//! struct's visitor sees it, with the path of the offending value.
//!
//! The body is parsed once into a `serde_json::Value` (which bounds nesting
//! at serde_json's limit) and the type is then read from that tree through
//! [`Node`], a deserializer that knows the path of every value so that
//! every error says where it is: `data[2]: unknown field "valu"`.
//!
//! Produce bodies have their own decoder (`records/mod.rs`), which applies the
//! same rule to the body, each record and each header.

use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess};
use serde::de::{Deserializer, Visitor};
use serde_json::Value;

use crate::records::kind;

/// Why a body does not decode, with where when known.
#[derive(Debug)]
pub(crate) struct BodyError {
    message: String,
    /// The message already starts with the path of the value at fault, so
    /// enclosing values do not prefix theirs.
    located: bool,
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BodyError {}

impl de::Error for BodyError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        BodyError {
            message: message.to_string(),
            located: false,
        }
    }
}

/// Decodes `body` into `T` (module doc). The message of the error is
/// the path, if any, and what is wrong.
pub(crate) fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, BodyError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| BodyError {
        message: format!("not JSON: {e}"),
        located: false,
    })?;
    T::deserialize(Node {
        value: &value,
        path: Path::Root,
    })
}

/// Where a value is in the body, built on the stack as the decoder goes
/// down and rendered only for an error.
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    Field(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Field(Path::Root, name) => write!(f, "{name}"),
            Path::Field(parent, name) => write!(f, "{parent}.{name}"),
            Path::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

/// One value of the body and its path.
struct Node<'a> {
    value: &'a Value,
    path: Path<'a>,
}

impl Node<'_> {
    /// Prefixes an error raised at this value (not below it) with its path.
    fn locate(&self, e: BodyError) -> BodyError {
        if e.located || matches!(self.path, Path::Root) {
            return e;
        }
        BodyError {
            message: format!("{}: {}", self.path, e.message),
            located: true,
        }
    }
}

impl<'de> Deserializer<'de> for Node<'_> {
    type Error = BodyError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, BodyError> {
        let result = match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    // Without serde_json's `arbitrary_precision` every
                    // other number is an f64.
                    visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => visitor.visit_str(s),
            Value::Array(items) => visitor.visit_seq(Items {
                items: items.iter().enumerate(),
                parent: &self.path,
            }),
            Value::Object(members) => visitor.visit_map(Members {
                members: members.iter(),
                pending: None,
                parent: &self.path,
            }),
        };
        result.map_err(|e| self.locate(e))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, BodyError> {
        match self.value {
            Value::Null => visitor.visit_none().map_err(|e| self.locate(e)),
            _ => visitor.visit_some(self),
        }
    }

    /// The rule of this module: a struct is read from an object only.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, BodyError> {
        match self.value {
            Value::Object(_) => self.deserialize_any(visitor),
            other => {
                let what = match self.path {
                    Path::Root => "the body".to_string(),
                    path => path.to_string(),
                };
                Err(BodyError {
                    message: format!("{what} must be a JSON object, not {}", kind(other)),
                    located: true,
                })
            }
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, BodyError> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map enum
        identifier ignored_any
    }
}

struct Items<'a, 'p> {
    items: std::iter::Enumerate<std::slice::Iter<'a, Value>>,
    parent: &'p Path<'p>,
}

impl<'de> SeqAccess<'de> for Items<'_, '_> {
    type Error = BodyError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, BodyError> {
        match self.items.next() {
            None => Ok(None),
            Some((i, value)) => seed
                .deserialize(Node {
                    value,
                    path: Path::Index(self.parent, i),
                })
                .map(Some),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct Members<'a, 'p> {
    members: serde_json::map::Iter<'a>,
    /// The member whose name was just read.
    pending: Option<(&'a str, &'a Value)>,
    parent: &'p Path<'p>,
}

impl<'de> MapAccess<'de> for Members<'_, '_> {
    type Error = BodyError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, BodyError> {
        match self.members.next() {
            None => Ok(None),
            Some((name, value)) => {
                self.pending = Some((name, value));
                seed.deserialize(name.as_str().into_deserializer())
                    .map(Some)
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, BodyError> {
        let (name, value) = self
            .pending
            .take()
            .ok_or_else(|| de::Error::custom("a member value was asked for before its name"))?;
        seed.deserialize(Node {
            value,
            path: Path::Field(self.parent, name),
        })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.members.len())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        flag: Option<bool>,
        #[serde(default)]
        items: Vec<Inner>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        name: String,
        n: Option<u64>,
    }

    fn message(body: &str) -> String {
        decode::<Outer>(body.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn objects_decode_as_before() {
        let got: Outer =
            decode(br#"{"flag":true,"items":[{"name":"a","n":3},{"name":"b","n":null}]}"#).unwrap();
        assert_eq!(
            got,
            Outer {
                flag: Some(true),
                items: vec![
                    Inner {
                        name: "a".into(),
                        n: Some(3)
                    },
                    Inner {
                        name: "b".into(),
                        n: None
                    },
                ],
            }
        );
        assert_eq!(
            decode::<Outer>(b"{}").unwrap(),
            Outer {
                flag: None,
                items: vec![]
            }
        );
    }

    #[test]
    fn a_sequence_is_never_read_as_a_struct() {
        // serde_json alone accepts every one of these.
        assert!(serde_json::from_str::<Outer>("[true]").is_ok());
        assert_eq!(
            message("[true]"),
            "the body must be a JSON object, not an array"
        );
        assert_eq!(
            message("true"),
            "the body must be a JSON object, not a boolean"
        );
        assert_eq!(message("null"), "the body must be a JSON object, not null");
        assert_eq!(
            message(r#"{"items":[["a",1]]}"#),
            "items[0] must be a JSON object, not an array"
        );
        assert_eq!(
            message(r#"{"items":[{"name":"a"},"b"]}"#),
            "items[1] must be a JSON object, not a string"
        );
    }

    #[test]
    fn errors_name_the_value_at_fault() {
        assert!(message("{").starts_with("not JSON: "));
        assert_eq!(
            message(r#"{"flag":1}"#),
            "flag: invalid type: integer `1`, expected a boolean"
        );
        assert!(
            message(r#"{"items":[{"name":"a"},{"nam":"b"}]}"#)
                .starts_with("items[1]: unknown field `nam`"),
            "{}",
            message(r#"{"items":[{"name":"a"},{"nam":"b"}]}"#)
        );
        assert_eq!(
            message(r#"{"items":[{"n":1}]}"#),
            "items[0]: missing field `name`"
        );
        assert!(message(r#"{"flgg":true}"#).starts_with("unknown field `flgg`"));
    }
}
