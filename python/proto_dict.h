// A protobuf message as a Python dict, for the module's reports (server
// statistics): every singular field by name (its default when unset),
// message fields only when set, repeated fields as lists, enums by their
// value's name, bytes as bytes. 64-bit integers stay exact (Python ints).
// Call with the GIL held.
#ifndef PS_PYTHON_PROTO_DICT_H_
#define PS_PYTHON_PROTO_DICT_H_

#include "google/protobuf/message.h"
#include "pybind11/pybind11.h"

namespace ps::python {

pybind11::dict ProtoToDict(const google::protobuf::Message& message);

}  // namespace ps::python

#endif  // PS_PYTHON_PROTO_DICT_H_
