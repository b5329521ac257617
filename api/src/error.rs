//! The one place where errors of the contract become `tonic::Status`.

use tonic::{Code, Status};

/// An error either side of the contract reports to the other.
///
/// Field paths follow the request's shape (`sessions[3].ipv4`) so that an operator reading a
/// log line knows which item of a batch was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    #[error("invalid argument {field}: {reason}")]
    InvalidArgument { field: String, reason: String },
    #[error("{kind} {id} not found")]
    NotFound { kind: &'static str, id: String },
    #[error("{kind} {id} already exists with different contents")]
    AlreadyExists { kind: &'static str, id: String },
    #[error("failed precondition: {0}")]
    FailedPrecondition(String),
    #[error("resource exhausted: {0}")]
    ResourceExhausted(String),
    #[error("unavailable: {0}")]
    Unavailable(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ApiError::InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }

    pub fn not_found(kind: &'static str, id: impl ToString) -> Self {
        ApiError::NotFound {
            kind,
            id: id.to_string(),
        }
    }

    pub fn code(&self) -> Code {
        match self {
            ApiError::InvalidArgument { .. } => Code::InvalidArgument,
            ApiError::NotFound { .. } => Code::NotFound,
            ApiError::AlreadyExists { .. } => Code::AlreadyExists,
            ApiError::FailedPrecondition(_) => Code::FailedPrecondition,
            ApiError::ResourceExhausted(_) => Code::ResourceExhausted,
            ApiError::Unavailable(_) => Code::Unavailable,
            ApiError::Internal(_) => Code::Internal,
        }
    }
}

impl From<ApiError> for Status {
    fn from(err: ApiError) -> Self {
        Status::new(err.code(), err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_argument_names_the_field() {
        let status = Status::from(ApiError::invalid("sessions[3].outer_vlan", "4096 > 4094"));
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(status.message().contains("sessions[3].outer_vlan"));
    }

    #[test]
    fn each_variant_has_its_own_code() {
        let all = [
            ApiError::invalid("f", "r"),
            ApiError::not_found("session", 7),
            ApiError::AlreadyExists {
                kind: "session",
                id: "7".into(),
            },
            ApiError::FailedPrecondition("x".into()),
            ApiError::ResourceExhausted("x".into()),
            ApiError::Unavailable("x".into()),
            ApiError::Internal("x".into()),
        ];
        let codes: std::collections::HashSet<_> = all.iter().map(|e| e.code() as i32).collect();
        assert_eq!(codes.len(), all.len());
    }
}
