// Request bytes that do not parse get INVALID_ARGUMENT. gRPC's callback API
// answers bytes that are not the method's message with UNIMPLEMENTED and no
// message, before any handler runs (CallbackUnaryHandler::RunHandler), which
// reads as "no such method" to the client. So the services register their
// methods raw (the generated WithRawCallbackMethod_*) and parse the bytes
// here.
#ifndef DOCSPARSE_SERVER_PARSED_UNARY_CALL_H_
#define DOCSPARSE_SERVER_PARSED_UNARY_CALL_H_

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include <functional>
#include <string>
#include <utility>

namespace docsparse {

// Parses `bytes` as `message`; false when they are not one.
template <typename Message>
bool ParseRequestBytes(const grpc::ByteBuffer& bytes, Message* message) {
  grpc::ByteBuffer copy(bytes);  // shares the slices; Deserialize empties its buffer
  return grpc::SerializationTraits<Message>::Deserialize(&copy, message).ok();
}

// INVALID_ARGUMENT: "request: the bytes are not a docsparse.v1.EmbedRequest".
inline grpc::Status UnparsedRequest(const google::protobuf::Descriptor& type) {
  return grpc::Status(
      grpc::StatusCode::INVALID_ARGUMENT,
      "request: the bytes are not a " + type.full_name() + " (protobuf wire format expected)");
}

// One unary call of a raw method: the parsed request, the response the
// handler fills, and Respond, which serializes the response and finishes.
// Lives until gRPC is done with the call, like the request and response of
// a typed method.
template <typename Request, typename Response>
class ParsedUnaryCall final : public grpc::ServerUnaryReactor {
 public:
  // Parses `bytes` and runs `handler(call)`, which must make the call
  // Respond once (then or later). Bytes that do not parse are answered with
  // `refusal(UnparsedRequest(...))`, which may put another status first (an
  // unauthenticated caller learns nothing of the message).
  static grpc::ServerUnaryReactor* Start(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* bytes, grpc::ByteBuffer* out,
      const std::function<grpc::Status(const grpc::Status&)>& refusal,
      const std::function<void(ParsedUnaryCall*)>& handler) {
    auto* call = new ParsedUnaryCall(context, out);
    if (!ParseRequestBytes(*bytes, &call->request_)) {
      call->Finish(refusal(UnparsedRequest(*Request::descriptor())));
    } else {
      handler(call);
    }
    return call;
  }

  grpc::CallbackServerContext* context() const { return context_; }
  const Request& request() const { return request_; }
  Response* response() { return &response_; }

  void Respond(const grpc::Status& status) {
    if (!status.ok()) return Finish(status);
    bool own_buffer = false;
    const grpc::Status serialized =
        grpc::SerializationTraits<Response>::Serialize(response_, out_, &own_buffer);
    Finish(serialized.ok()
               ? status
               : grpc::Status(grpc::StatusCode::INTERNAL,
                              "cannot serialize the response: " + serialized.error_message()));
  }

  void OnDone() override { delete this; }

 private:
  ParsedUnaryCall(grpc::CallbackServerContext* context, grpc::ByteBuffer* out)
      : context_(context), out_(out) {}

  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const out_;
  Request request_;
  Response response_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_PARSED_UNARY_CALL_H_
