// RETURN_IF_ERROR / ASSIGN_OR_RETURN: Abseil 20220623 ships neither.
#ifndef DOCSPARSE_COMMON_STATUS_MACROS_H_
#define DOCSPARSE_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DOCSPARSE_CONCAT_INNER_(a, b) a##b
#define DOCSPARSE_CONCAT_(a, b) DOCSPARSE_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing
// function when it is not OK.
#define RETURN_IF_ERROR(expr)                              \
  do {                                                     \
    const ::absl::Status _docsparse_status = (expr);       \
    if (!_docsparse_status.ok()) return _docsparse_status; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` evaluates an absl::StatusOr<T>, returns
// its status on error, else moves the value into `lhs`.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ASSIGN_OR_RETURN_IMPL_(DOCSPARSE_CONCAT_(_docsparse_or_, __LINE__), lhs, rexpr)

#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr)       \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // DOCSPARSE_COMMON_STATUS_MACROS_H_
