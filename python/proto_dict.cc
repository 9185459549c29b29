#include "python/proto_dict.h"

#include <string>

#include "google/protobuf/descriptor.h"

namespace py = pybind11;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

namespace ps::python {

namespace {

// Field `field` of `message`: its value, or element `index` when repeated.
py::object FieldValue(const Message& message, const FieldDescriptor* field, int index) {
  const Reflection& r = *message.GetReflection();
  const bool repeated = field->is_repeated();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return py::int_(repeated ? r.GetRepeatedInt32(message, field, index)
                               : r.GetInt32(message, field));
    case FieldDescriptor::CPPTYPE_INT64:
      return py::int_(repeated ? r.GetRepeatedInt64(message, field, index)
                               : r.GetInt64(message, field));
    case FieldDescriptor::CPPTYPE_UINT32:
      return py::int_(repeated ? r.GetRepeatedUInt32(message, field, index)
                               : r.GetUInt32(message, field));
    case FieldDescriptor::CPPTYPE_UINT64:
      return py::int_(repeated ? r.GetRepeatedUInt64(message, field, index)
                               : r.GetUInt64(message, field));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return py::float_(repeated ? r.GetRepeatedDouble(message, field, index)
                                 : r.GetDouble(message, field));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return py::float_(repeated ? r.GetRepeatedFloat(message, field, index)
                                 : r.GetFloat(message, field));
    case FieldDescriptor::CPPTYPE_BOOL:
      return py::bool_(repeated ? r.GetRepeatedBool(message, field, index)
                                : r.GetBool(message, field));
    case FieldDescriptor::CPPTYPE_ENUM:
      return py::str(
          (repeated ? r.GetRepeatedEnum(message, field, index) : r.GetEnum(message, field))
              ->name());
    case FieldDescriptor::CPPTYPE_STRING: {
      const std::string value =
          repeated ? r.GetRepeatedString(message, field, index) : r.GetString(message, field);
      if (field->type() == FieldDescriptor::TYPE_BYTES) return py::bytes(value);
      return py::str(value);
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ProtoToDict(repeated ? r.GetRepeatedMessage(message, field, index)
                                  : r.GetMessage(message, field));
  }
  return py::none();
}

}  // namespace

py::dict ProtoToDict(const Message& message) {
  py::dict result;
  const Reflection& r = *message.GetReflection();
  const google::protobuf::Descriptor& descriptor = *message.GetDescriptor();
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const FieldDescriptor* field = descriptor.field(i);
    const char* name = field->name().c_str();
    if (field->is_repeated()) {
      py::list values;
      for (int k = 0; k < r.FieldSize(message, field); ++k) {
        values.append(FieldValue(message, field, k));
      }
      result[name] = std::move(values);
    } else if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE ||
               r.HasField(message, field)) {
      result[name] = FieldValue(message, field, -1);
    }
  }
  return result;
}

}  // namespace ps::python
