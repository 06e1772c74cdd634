#include "server/reflection_v1_service.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <set>

#include "absl/strings/str_cat.h"

namespace docsparse {
namespace {

using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;
using grpc::reflection::v1::ServerReflectionRequest;
using grpc::reflection::v1::ServerReflectionResponse;

void SetError(grpc::StatusCode code, const std::string& message,
              ServerReflectionResponse* response) {
  response->mutable_error_response()->set_error_code(static_cast<int32_t>(code));
  response->mutable_error_response()->set_error_message(message);
}

// `file` and every file it imports, each once, dependencies included as the
// protocol asks (a client builds its pool from them in one round trip).
void AddFileWithDependencies(const FileDescriptor* file, std::set<std::string>* seen,
                             ServerReflectionResponse* response) {
  if (!seen->insert(file->name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  proto.SerializeToString(
      response->mutable_file_descriptor_response()->add_file_descriptor_proto());
  for (int i = 0; i < file->dependency_count(); ++i) {
    AddFileWithDependencies(file->dependency(i), seen, response);
  }
}

// Reads a request, writes its answer, until the client closes its side.
class ReflectionStream final
    : public grpc::ServerBidiReactor<ServerReflectionRequest, ServerReflectionResponse> {
 public:
  explicit ReflectionStream(const ReflectionV1Service& service) : service_(service) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return Finish(grpc::Status::OK);  // the client is done asking
    response_ = service_.Answer(request_);
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::UNKNOWN, "write failed"));
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  const ReflectionV1Service& service_;
  ServerReflectionRequest request_;
  ServerReflectionResponse response_;
};

}  // namespace

grpc::ServerBidiReactor<ServerReflectionRequest, ServerReflectionResponse>*
ReflectionV1Service::ServerReflectionInfo(grpc::CallbackServerContext*) {
  return new ReflectionStream(*this);
}

ServerReflectionResponse ReflectionV1Service::Answer(const ServerReflectionRequest& request) const {
  const DescriptorPool& pool = *DescriptorPool::generated_pool();
  ServerReflectionResponse response;
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  std::set<std::string> seen;
  switch (request.message_request_case()) {
    case ServerReflectionRequest::kListServices:
      for (const std::string& name : services_) {
        response.mutable_list_services_response()->add_service()->set_name(name);
      }
      break;
    case ServerReflectionRequest::kFileByFilename:
      if (const FileDescriptor* file = pool.FindFileByName(request.file_by_filename())) {
        AddFileWithDependencies(file, &seen, &response);
      } else {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("file not found: ", request.file_by_filename()), &response);
      }
      break;
    case ServerReflectionRequest::kFileContainingSymbol:
      if (const FileDescriptor* file =
              pool.FindFileContainingSymbol(request.file_containing_symbol())) {
        AddFileWithDependencies(file, &seen, &response);
      } else {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("symbol not found: ", request.file_containing_symbol()), &response);
      }
      break;
    case ServerReflectionRequest::kFileContainingExtension: {
      const auto& wanted = request.file_containing_extension();
      const google::protobuf::Descriptor* type =
          pool.FindMessageTypeByName(wanted.containing_type());
      const google::protobuf::FieldDescriptor* extension =
          type == nullptr ? nullptr : pool.FindExtensionByNumber(type, wanted.extension_number());
      if (extension != nullptr) {
        AddFileWithDependencies(extension->file(), &seen, &response);
      } else {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("extension not found: ", wanted.containing_type(), " ",
                              wanted.extension_number()),
                 &response);
      }
      break;
    }
    case ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const google::protobuf::Descriptor* type =
          pool.FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (type == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("type not found: ", request.all_extension_numbers_of_type()),
                 &response);
        break;
      }
      std::vector<const google::protobuf::FieldDescriptor*> extensions;
      pool.FindAllExtensions(type, &extensions);
      auto* numbers = response.mutable_all_extension_numbers_response();
      numbers->set_base_type_name(type->full_name());
      for (const auto* extension : extensions) numbers->add_extension_number(extension->number());
      break;
    }
    case ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
      SetError(grpc::StatusCode::INVALID_ARGUMENT,
               "message_request: set one of file_by_filename, file_containing_symbol, "
               "file_containing_extension, all_extension_numbers_of_type, list_services",
               &response);
      break;
  }
  return response;
}

}  // namespace docsparse
