//! `scalar Count`: the type of every counter and `totalCount`; and a
//! user's `Counters`, one `Count` each.

use async_graphql::{
    InputValueError, InputValueResult, Number, Scalar, ScalarType, SimpleObject, Value,
};

/// A number of things: a non-negative whole number, sent as a JSON number.
///
/// GraphQL's `Int` is 32-bit signed and cannot say more than 2,147,483,647 —
/// fewer than the likes a popular account receives. `Count` has no such
/// ceiling in the schema: it is exact up to 2^53 − 1, the largest whole
/// number a JavaScript client holds exactly. (Kith's Redis counter record
/// keeps each counter in 32 unsigned bits today, so a count saturates at
/// 4,294,967,295; PostgreSQL keeps 64.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Count(pub u64);

/// A non-negative whole number, exact up to 2^53 − 1 (no 2^31 − 1 ceiling as `Int` has).
#[Scalar(name = "Count")]
impl ScalarType for Count {
    fn parse(value: Value) -> InputValueResult<Self> {
        match &value {
            Value::Number(n) => n
                .as_u64()
                .map(Count)
                .ok_or_else(|| InputValueError::custom("a count is a whole number >= 0")),
            _ => Err(InputValueError::expected_type(value)),
        }
    }

    fn to_value(&self) -> Value {
        Value::Number(Number::from(self.0))
    }
}

impl From<u32> for Count {
    fn from(n: u32) -> Self {
        Self(n.into())
    }
}

/// A count whose work is bounded: exact, or a lower bound past the bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, SimpleObject)]
pub struct BoundedCount {
    /// The count — when `exact` is false, at least this many.
    pub count: Count,
    /// True when `count` is exact.
    pub exact: bool,
}

macro_rules! counters_object {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// A user's counters.
        #[derive(SimpleObject, Clone, Copy)]
        pub(crate) struct Counters {
            $($(#[$doc])* pub(crate) $name: Count,)*
        }

        impl From<crate::cache::counters::CounterRecord> for Counters {
            fn from(r: crate::cache::counters::CounterRecord) -> Self {
                Self { $($name: r.$name.into(),)* }
            }
        }
    };
}
crate::model::with_counters!(counters_object);
