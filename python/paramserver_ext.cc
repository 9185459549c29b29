// _paramserver: the compiled half of the Python module `paramserver`, over
// the C++ client library (worker/client/ps_client.h). paramserver/__init__.py
// is its public face: documentation, defaults and the checks of plain Python
// values. This file checks arrays (python/numpy_args.h) and the names it
// maps to the library's enums, and makes the calls.
//
// - Errors of the library (absl::Status) raise paramserver.Error (defined in
//   paramserver/_errors.py) carrying the status code's name and the message;
//   bad arguments raise TypeError or ValueError before anything is sent.
// - Pulls write into a NumPy array's memory (a new float32 array, or the
//   caller's `out`) and pushes send from the caller's array: nothing is
//   copied here.
// - The GIL is released around every call that may wait on the network, so
//   other Python threads run meanwhile; a Client may be shared by threads
//   (PsClient is thread-safe).
//
// Lifetime: a Client owns its Connection (the PsClient and, for a replicated
// cluster, the etcd store and the ring's directory it follows) through a
// shared_ptr, and every call holds another one while it runs without the
// GIL. close() drops the Client's; whoever lets go of the Connection last
// destroys it, with the GIL released, because that waits for pending pushes
// and tells the servers this worker left.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/etcd_kv_store.h"
#include "common/peer_security.h"
#include "common/process_tuning.h"
#include "common/table_def.h"
#include "proto/ps.pb.h"
#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "python/cluster_access.h"
#include "python/numpy_args.h"
#include "python/proto_dict.h"
#include "python/table_args.h"
#include "worker/client/ps_client.h"
#include "worker/client/shard_directory.h"

namespace py = pybind11;

namespace ps::python {

namespace {

class Client {
 public:
  struct Options {
    std::string servers;  // host:port,... ("" with etcd)
    std::string etcd;
    std::string cluster;
    uint32_t worker_id = 0;
    std::string consistency;
    uint32_t staleness = 0;
    std::optional<double> timeout;
    double connect_timeout = 30;
    std::optional<int> max_attempts;
    double lease = 0;
    std::string token, ca_cert, cert, key;
    std::optional<uint64_t> slice_size;
    std::optional<int> virtual_nodes;
    bool key_list_caching = false;
  };

  static std::unique_ptr<Client> Connect(const Options& o) {
    PsClientOptions options;
    options.worker_id = o.worker_id;
    // BSP is bounded delay with staleness 0 (proto::Consistency).
    if (o.consistency != "async" && o.consistency != "bsp" && o.consistency != "bounded") {
      throw py::value_error(absl::StrCat("Client: consistency='", o.consistency,
                                         "': expected one of 'async', 'bsp', 'bounded'"));
    }
    if (o.consistency != "bounded" && o.staleness != 0) {
      throw py::value_error(absl::StrCat("Client: staleness=", o.staleness, " with consistency='",
                                         o.consistency,
                                         "': only consistency='bounded' takes a staleness"));
    }
    options.consistency =
        o.consistency == "async" ? proto::CONSISTENCY_ASYNC : proto::CONSISTENCY_BOUNDED;
    options.staleness = o.staleness;
    options.connect_timeout = absl::Seconds(o.connect_timeout);
    options.lease = absl::Seconds(o.lease);
    options.key_list_caching = o.key_list_caching;
    if (o.slice_size.has_value()) options.placement.slice_size = *o.slice_size;
    if (o.virtual_nodes.has_value()) options.placement.virtual_nodes = *o.virtual_nodes;
    options.security = SecurityOf("Client", o.token, o.ca_cert, o.cert, o.key);
    if (o.etcd.empty()) options.servers = ServersOf("Client", o.servers);
    auto connection = std::make_shared<Connection>();
    absl::Status connected;
    {
      py::gil_scoped_release release;
      connected = ConnectWithoutGil(o, options, connection.get());
      // A half-built connection (etcd's watch) is destroyed here, without the GIL.
      if (!connected.ok()) connection.reset();
    }
    ThrowIfError(connected);
    return std::unique_ptr<Client>(new Client(std::move(connection)));
  }

  ~Client() { Close(); }

  void Close() {
    // connection_ is only read and written with the GIL held.
    std::shared_ptr<Connection> connection = std::move(connection_);
    if (connection == nullptr) return;
    py::gil_scoped_release release;
    connection.reset();
  }

  int NumServers() const { return Live()->client->num_servers(); }

  void CreateTable(const TableShape& shape, const TableInit& init,
                   const TableOptimizer& optimizer) {
    const proto::TableDef def = TableDefOf(shape, init, optimizer);
    ThrowIfError(WithoutGil(Live(), [&](PsClient& c) { return c.CreateTable(def); }));
  }

  py::array Pull(const std::string& table, uint64_t begin, std::optional<uint64_t> end,
                 uint64_t clock, py::handle out) {
    std::shared_ptr<Connection> connection = Live();
    const proto::TableDef def = Definition(connection, table);
    if (!end.has_value()) {
      if (def.kind() == proto::TABLE_SPARSE) {
        throw py::value_error(absl::StrCat("pull: table '", table,
                                           "' is sparse (no range of keys): read its rows with "
                                           "pull_keys"));
      }
      end = def.num_keys();
    }
    // A reversed range goes to the client, which refuses it (INVALID_ARGUMENT).
    const uint64_t num_keys = *end > begin ? *end - begin : 0;
    absl::Span<float> values;
    py::array result = OutputArray({"pull", "out"}, table, out, num_keys, def.width(), &values);
    const PullRange op{table, begin, *end, values};
    ThrowIfError(WithoutGil(std::move(connection), [&](PsClient& c) {
      return c.Pull({&op, 1}, clock);
    }));
    return result;
  }

  void Push(const std::string& table, py::handle grads, uint64_t begin, uint64_t clock) {
    const ArgName arg{"push", "grads"};
    const py::array array = ArrayArg(arg, grads);
    const absl::Span<const float> values = FloatValues(arg, array);
    std::shared_ptr<Connection> connection = Live();
    const proto::TableDef def = Definition(connection, table);
    const uint64_t num_keys = KeysOf(arg, table, values, begin, def.width());
    const PushRange op{table, begin, begin + num_keys, values};
    ThrowIfError(WithoutGil(std::move(connection), [&](PsClient& c) {
      return c.Push({&op, 1}, clock);
    }));
  }

  py::array PushPull(const std::string& table, py::handle grads, uint64_t begin, uint64_t clock,
                     py::handle out) {
    const ArgName arg{"push_pull", "grads"};
    const py::array array = ArrayArg(arg, grads);
    const absl::Span<const float> values = FloatValues(arg, array);
    std::shared_ptr<Connection> connection = Live();
    const DenseStep step = StepOf(connection, table, begin, arg, values, {"push_pull", "out"}, out);
    ThrowIfError(WithoutGil(std::move(connection), [&](PsClient& c) {
      return c.PushPull({&step.push, 1}, {&step.pull, 1}, clock);
    }));
    return step.out;
  }

  py::array PullKeys(const std::string& table, py::handle keys, py::handle out) {
    const py::array key_array = ArrayArg({"pull_keys", "keys"}, keys);
    const absl::Span<const uint64_t> key_span = Keys({"pull_keys", "keys"}, key_array);
    std::shared_ptr<Connection> connection = Live();
    const proto::TableDef def = Definition(connection, table);
    absl::Span<float> values;
    py::array result =
        OutputArray({"pull_keys", "out"}, table, out, key_span.size(), def.width(), &values);
    ThrowIfError(WithoutGil(std::move(connection), [&](PsClient& c) {
      return c.PullKeys(table, key_span, def.width(), values);
    }));
    return result;
  }

  void PushKeys(const std::string& table, py::handle keys, py::handle grads, uint64_t clock) {
    const py::array key_array = ArrayArg({"push_keys", "keys"}, keys);
    const absl::Span<const uint64_t> key_span = Keys({"push_keys", "keys"}, key_array);
    const ArgName arg{"push_keys", "grads"};
    const py::array grad_array = ArrayArg(arg, grads);
    const absl::Span<const float> values = FloatValues(arg, grad_array);
    std::shared_ptr<Connection> connection = Live();
    const proto::TableDef def = Definition(connection, table);
    CheckKeyValues(arg, table, values, key_span.size(), def.width());
    ThrowIfError(WithoutGil(std::move(connection), [&](PsClient& c) {
      return c.PushKeys(table, key_span, def.width(), values, clock);
    }));
  }

  // Several dense tables' Downpour steps in one PsClient::PushPull: op i
  // pushes grads[i] to tables[i] from key begins[i] and reads the same keys
  // back into outs[i]. One round trip per server carries every op (a model's
  // small tables cost one call, not one each). Every op is checked before
  // anything is sent.
  py::dict PushPullMany(const std::vector<std::string>& tables, const py::sequence& grads,
                        const std::vector<uint64_t>& begins, const py::sequence& outs,
                        uint64_t clock) {
    constexpr const char* kCall = "push_pull_many";
    const size_t n = tables.size();
    CheckOpCounts(kCall, {{n, "tables"},
                          {py::len(grads), "grads"},
                          {begins.size(), "begins"},
                          {py::len(outs), "outs"}});
    std::shared_ptr<Connection> connection = Live();
    // Names such as "grads[2]" for messages, and the arrays, kept alive
    // while the call runs without the GIL.
    std::vector<std::string> grad_names(n), out_names(n);
    std::vector<py::array> arrays;
    arrays.reserve(2 * n);
    std::vector<PushRange> push(n);
    std::vector<PullRange> pull(n);
    for (size_t i = 0; i < n; ++i) {
      grad_names[i] = absl::StrCat("grads[", i, "]");
      out_names[i] = absl::StrCat("outs[", i, "]");
      const ArgName grad_arg{kCall, grad_names[i].c_str()};
      arrays.push_back(ArrayArg(grad_arg, grads[i]));
      const absl::Span<const float> values = FloatValues(grad_arg, arrays.back());
      const py::handle out = outs[i];
      if (out.is_none()) {
        throw py::value_error(absl::StrCat(kCall, ": ", out_names[i], " is None: pass the array ",
                                           "the values of table '", tables[i], "' go to"));
      }
      const DenseStep step = StepOf(connection, tables[i], begins[i], grad_arg, values,
                                    {kCall, out_names[i].c_str()}, out);
      arrays.push_back(step.out);
      push[i] = step.push;
      pull[i] = step.pull;
    }
    // No op's pulled values may land on another's gradients or values.
    std::vector<absl::Span<float>> out_spans(n);
    std::vector<absl::Span<const float>> grad_spans(n);
    for (size_t i = 0; i < n; ++i) out_spans[i] = pull[i].out, grad_spans[i] = push[i].grads;
    CheckSeparateOps(kCall, out_spans, grad_spans);
    PullInfo info;
    int num_servers = 0;
    ThrowIfError(WithoutGil(std::move(connection), [&](PsClient& c) {
      num_servers = c.num_servers();
      return c.PushPull(push, pull, clock, &info);
    }));
    return InfoDict(info, n, num_servers);
  }

  // Several dense tables read in one PsClient::Pull: op i reads the keys
  // of tables[i] from begins[i] into outs[i] (as many keys as outs[i] holds
  // rows). Returns the pull's versions, params_clock and wait.
  py::dict PullMany(const std::vector<std::string>& tables, const std::vector<uint64_t>& begins,
                    const py::sequence& outs, uint64_t clock) {
    constexpr const char* kCall = "pull_many";
    const size_t n = tables.size();
    CheckOpCounts(kCall, {{n, "tables"}, {begins.size(), "begins"}, {py::len(outs), "outs"}});
    std::shared_ptr<Connection> connection = Live();
    std::vector<std::string> out_names(n);
    std::vector<py::array> arrays;
    arrays.reserve(n);
    std::vector<PullRange> pull(n);
    for (size_t i = 0; i < n; ++i) {
      out_names[i] = absl::StrCat("outs[", i, "]");
      const ArgName out_arg{kCall, out_names[i].c_str()};
      arrays.push_back(ArrayArg(out_arg, outs[i]));
      const proto::TableDef def = Definition(connection, tables[i]);
      const uint64_t size = static_cast<uint64_t>(arrays.back().size());
      if (def.width() == 0 || size % def.width() != 0) {
        throw py::value_error(absl::StrCat(kCall, ": ", out_names[i], " has ", size,
                                           " values, not whole rows of table '", tables[i],
                                           "' (width ", def.width(), ")"));
      }
      const uint64_t num_keys = size / def.width();
      const absl::Span<float> values = OutputValues(out_arg, arrays.back(), num_keys, def.width());
      pull[i] = PullRange{tables[i], begins[i], begins[i] + num_keys, values};
    }
    std::vector<absl::Span<float>> out_spans(n);
    for (size_t i = 0; i < n; ++i) out_spans[i] = pull[i].out;
    CheckSeparateOps(kCall, out_spans, {});
    PullInfo info;
    int num_servers = 0;
    ThrowIfError(WithoutGil(std::move(connection), [&](PsClient& c) {
      num_servers = c.num_servers();
      return c.Pull(pull, clock, &info);
    }));
    return InfoDict(info, n, num_servers);
  }

  // Several dense tables pushed in one PsClient::Push: grads[i] to
  // tables[i] from key begins[i]. Returns the versions the push reached,
  // a uint64 array of shape (ops, servers).
  py::array PushMany(const std::vector<std::string>& tables, const py::sequence& grads,
                     const std::vector<uint64_t>& begins, uint64_t clock) {
    constexpr const char* kCall = "push_many";
    const size_t n = tables.size();
    CheckOpCounts(kCall, {{n, "tables"}, {py::len(grads), "grads"}, {begins.size(), "begins"}});
    std::shared_ptr<Connection> connection = Live();
    std::vector<std::string> grad_names(n);
    std::vector<py::array> arrays;
    arrays.reserve(n);
    std::vector<PushRange> push(n);
    for (size_t i = 0; i < n; ++i) {
      grad_names[i] = absl::StrCat("grads[", i, "]");
      const ArgName grad_arg{kCall, grad_names[i].c_str()};
      arrays.push_back(ArrayArg(grad_arg, grads[i]));
      const absl::Span<const float> values = FloatValues(grad_arg, arrays.back());
      const proto::TableDef def = Definition(connection, tables[i]);
      const uint64_t num_keys = KeysOf(grad_arg, tables[i], values, begins[i], def.width());
      push[i] = PushRange{tables[i], begins[i], begins[i] + num_keys, values};
    }
    Versions versions;
    int num_servers = 0;
    ThrowIfError(WithoutGil(std::move(connection), [&](PsClient& c) {
      num_servers = c.num_servers();
      return c.Push(push, clock, &versions);
    }));
    return VersionsArray(versions, n, num_servers);
  }

  py::array PushPullKeys(const std::string& table, py::handle keys, py::handle grads,
                         uint64_t clock, py::handle out) {
    const py::array key_array = ArrayArg({"push_pull_keys", "keys"}, keys);
    const absl::Span<const uint64_t> key_span = Keys({"push_pull_keys", "keys"}, key_array);
    const ArgName arg{"push_pull_keys", "grads"};
    const py::array grad_array = ArrayArg(arg, grads);
    const absl::Span<const float> values = FloatValues(arg, grad_array);
    std::shared_ptr<Connection> connection = Live();
    const proto::TableDef def = Definition(connection, table);
    CheckKeyValues(arg, table, values, key_span.size(), def.width());
    absl::Span<float> pulled;
    py::array result =
        OutputArray({"push_pull_keys", "out"}, table, out, key_span.size(), def.width(), &pulled);
    CheckSeparate("push_pull_keys", values, pulled);
    ThrowIfError(WithoutGil(std::move(connection), [&](PsClient& c) {
      return c.PushPullKeys(table, key_span, def.width(), values, pulled, clock);
    }));
    return result;
  }

  py::dict TableDefinition(const std::string& table) {
    return ProtoToDict(Definition(Live(), table));
  }

  void WaitForWorkers(int n, double timeout) {
    ThrowIfError(WithoutGil(
        Live(), [&](PsClient& c) { return c.WaitForWorkers(n, absl::Seconds(timeout)); }));
  }

  void Leave() {
    WithoutGil(Live(), [](PsClient& c) { c.Leave(); });
  }

  // A progress point for the servers' web UI (PsClient::ReportProgress).
  void ReportProgress(const std::string& job, double seconds, int epoch, int64_t step,
                      int64_t examples, double loss, double examples_per_second, double staleness) {
    proto::ProgressPoint p;
    p.set_seconds(seconds);
    p.set_epoch(static_cast<uint32_t>(std::max(0, epoch)));
    p.set_step(static_cast<uint64_t>(std::max<int64_t>(0, step)));
    p.set_examples(static_cast<uint64_t>(std::max<int64_t>(0, examples)));
    p.set_loss(loss);
    p.set_examples_per_second(examples_per_second);
    p.set_staleness(staleness);
    ThrowIfError(WithoutGil(Live(), [&](PsClient& c) { return c.ReportProgress(job, p); }));
  }

  py::list Stats() {
    std::vector<ServerStats> stats =
        ValueOrThrow(WithoutGil(Live(), [](PsClient& c) { return c.Stats(); }));
    py::list result;
    for (const ServerStats& s : stats) {
      py::dict server;
      server["server"] = s.server;
      for (const auto& [name, value] : ProtoToDict(s.stats)) server[name] = value;
      result.append(std::move(server));
    }
    return result;
  }

  py::dict Position() {
    const PsClient::WorkerPosition position =
        ValueOrThrow(WithoutGil(Live(), [](PsClient& c) { return c.Position(); }));
    py::dict clocks;
    for (const auto& [table, clock] : position.clocks) clocks[py::str(table)] = clock;
    py::dict result;
    result["restored_from"] = position.restored_from;
    result["restored_cut"] = position.restored_cut;
    result["clocks"] = std::move(clocks);
    return result;
  }

 private:
  explicit Client(std::shared_ptr<Connection> connection) : connection_(std::move(connection)) {}

  // Connects (options: all but the replicated cluster's part) and fills
  // *connection; errors name etcd or the server that failed.
  static absl::Status ConnectWithoutGil(const Options& o, PsClientOptions options,
                                        Connection* connection) {
    if (!o.etcd.empty()) {
      connection->etcd = std::make_unique<EtcdKvStore>(EtcdOptions{o.etcd});
      absl::StatusOr<std::unique_ptr<EtcdShardDirectory>> directory =
          EtcdShardDirectory::Start(connection->etcd.get(), o.cluster, options.connect_timeout);
      if (!directory.ok()) {
        return absl::Status(directory.status().code(),
                            absl::StrCat("etcd=", o.etcd, ": ", directory.status().message()));
      }
      connection->directory = std::shared_ptr<const ShardDirectory>(*std::move(directory));
      options.directory = connection->directory;
      SpanFailoverWithRetries(&options);
    }
    // Values given win over the defaults of either kind of cluster.
    if (o.timeout.has_value()) options.timeout = absl::Seconds(*o.timeout);
    if (o.max_attempts.has_value()) options.max_attempts = *o.max_attempts;
    absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Connect(options);
    if (!client.ok()) return client.status();
    connection->client = *std::move(client);
    return absl::OkStatus();
  }

  std::shared_ptr<Connection> Live() const {
    if (connection_ == nullptr) throw py::value_error("the Client is closed");
    return connection_;
  }

  // One dense Downpour step, checked: `values` (the array named grad_arg)
  // pushed to `table` from key `begin`, and the same keys read back into
  // `out` (named out_arg; None: a new array). The table's width comes from
  // its definition.
  struct DenseStep {
    PushRange push;
    PullRange pull;
    py::array out;  // holds the pulled values' memory
  };
  static DenseStep StepOf(const std::shared_ptr<Connection>& connection, const std::string& table,
                          uint64_t begin, ArgName grad_arg, absl::Span<const float> values,
                          ArgName out_arg, py::handle out) {
    const proto::TableDef def = Definition(connection, table);
    const uint64_t num_keys = KeysOf(grad_arg, table, values, begin, def.width());
    DenseStep step;
    absl::Span<float> pulled;
    step.out = OutputArray(out_arg, table, out, num_keys, def.width(), &pulled);
    CheckSeparate(grad_arg.call, values, pulled);
    step.push = PushRange{table, begin, begin + num_keys, values};
    step.pull = PullRange{table, begin, begin + num_keys, pulled};
    return step;
  }

  // The table's definition (cached by PsClient after the first call).
  static proto::TableDef Definition(const std::shared_ptr<Connection>& connection,
                                    const std::string& table) {
    return ValueOrThrow(
        WithoutGil(connection, [&](PsClient& c) { return c.TableDefinition(table); }));
  }

  static void CheckKeyValues(ArgName arg, const std::string& table, absl::Span<const float> values,
                             uint64_t num_keys, uint32_t width) {
    CheckValues(arg.call, table, num_keys, width);
    if (values.size() != num_keys * width) {
      throw py::value_error(absl::StrCat(arg.call, ": ", arg.name, " has ", values.size(),
                                         " values; expected ", num_keys, " keys x width ", width,
                                         " of table '", table, "'"));
    }
  }

  // Versions (op i, server s at i * num_servers + s) as a uint64 array of
  // shape (ops, servers); zeros where the client reported none.
  static py::array VersionsArray(const Versions& versions, size_t ops, int num_servers) {
    py::array_t<uint64_t> result(
        std::vector<py::ssize_t>{static_cast<py::ssize_t>(ops), num_servers});
    uint64_t* data = result.mutable_data();
    const size_t size = ops * static_cast<size_t>(num_servers);
    for (size_t i = 0; i < size; ++i) data[i] = i < versions.size() ? versions[i] : 0;
    return result;
  }

  // What a pull learned: {"versions": (ops, servers) uint64 array,
  // "params_clock": int, "waited": seconds}.
  static py::dict InfoDict(const PullInfo& info, size_t ops, int num_servers) {
    py::dict result;
    result["versions"] = VersionsArray(info.versions, ops, num_servers);
    result["params_clock"] = info.params_clock;
    result["waited"] = absl::ToDoubleSeconds(info.waited);
    return result;
  }

  std::shared_ptr<Connection> connection_;  // null once closed
};

}  // namespace

}  // namespace ps::python

PYBIND11_MODULE(_paramserver, m) {
  using ps::python::Client;
  m.doc() = "The compiled half of paramserver; use the paramserver package.";

  py::class_<Client>(m, "Client")
      .def(py::init([](const std::string& servers, const std::string& etcd,
                       const std::string& cluster, uint32_t worker_id,
                       const std::string& consistency, uint32_t staleness,
                       std::optional<double> timeout, double connect_timeout,
                       std::optional<int> max_attempts, double lease, const std::string& token,
                       const std::string& ca_cert, const std::string& cert, const std::string& key,
                       std::optional<uint64_t> slice_size, std::optional<int> virtual_nodes,
                       bool key_list_caching) {
             return Client::Connect({servers, etcd, cluster, worker_id, consistency, staleness,
                                     timeout, connect_timeout, max_attempts, lease, token, ca_cert,
                                     cert, key, slice_size, virtual_nodes, key_list_caching});
           }),
           py::kw_only(), py::arg("servers"), py::arg("etcd"), py::arg("cluster"),
           py::arg("worker_id"), py::arg("consistency"), py::arg("staleness"), py::arg("timeout"),
           py::arg("connect_timeout"), py::arg("max_attempts"), py::arg("lease"), py::arg("token"),
           py::arg("ca_cert"), py::arg("cert"), py::arg("key"), py::arg("slice_size"),
           py::arg("virtual_nodes"), py::arg("key_list_caching"))
      .def("close", &Client::Close)
      .def_property_readonly("num_servers", &Client::NumServers)
      .def(
          "create_table",
          [](Client& self, const std::string& name, std::optional<uint64_t> size, uint32_t width,
             bool sparse, uint32_t buckets, const std::string& initializer, double init_low,
             double init_high, double init_mean, double init_stddev, uint64_t seed,
             const std::string& optimizer, double learning_rate, const py::dict& hyper) {
            self.CreateTable({name, size, width, sparse, buckets},
                             {initializer, init_low, init_high, init_mean, init_stddev, seed},
                             {optimizer, learning_rate, hyper});
          },
          py::arg("name"), py::arg("size"), py::arg("width"), py::arg("sparse"), py::arg("buckets"),
          py::arg("initializer"), py::arg("init_low"), py::arg("init_high"), py::arg("init_mean"),
          py::arg("init_stddev"), py::arg("seed"), py::arg("optimizer"), py::arg("learning_rate"),
          py::arg("hyper"))
      .def("pull", &Client::Pull, py::arg("table"), py::arg("begin"), py::arg("end"),
           py::arg("clock"), py::arg("out"))
      .def("push", &Client::Push, py::arg("table"), py::arg("grads"), py::arg("begin"),
           py::arg("clock"))
      .def("push_pull", &Client::PushPull, py::arg("table"), py::arg("grads"), py::arg("begin"),
           py::arg("clock"), py::arg("out"))
      .def("push_pull_many", &Client::PushPullMany, py::arg("tables"), py::arg("grads"),
           py::arg("begins"), py::arg("outs"), py::arg("clock"))
      .def("pull_many", &Client::PullMany, py::arg("tables"), py::arg("begins"), py::arg("outs"),
           py::arg("clock"))
      .def("push_many", &Client::PushMany, py::arg("tables"), py::arg("grads"), py::arg("begins"),
           py::arg("clock"))
      .def("table_definition", &Client::TableDefinition, py::arg("table"))
      .def("pull_keys", &Client::PullKeys, py::arg("table"), py::arg("keys"), py::arg("out"))
      .def("push_keys", &Client::PushKeys, py::arg("table"), py::arg("keys"), py::arg("grads"),
           py::arg("clock"))
      .def("push_pull_keys", &Client::PushPullKeys, py::arg("table"), py::arg("keys"),
           py::arg("grads"), py::arg("clock"), py::arg("out"))
      .def("wait_for_workers", &Client::WaitForWorkers, py::arg("n"), py::arg("timeout"))
      .def("leave", &Client::Leave)
      .def("report_progress", &Client::ReportProgress, py::arg("job"), py::arg("seconds"),
           py::arg("epoch"), py::arg("step"), py::arg("examples"), py::arg("loss"),
           py::arg("examples_per_second"), py::arg("staleness"))
      .def("stats", &Client::Stats)
      .def("position", &Client::Position);

  m.def("checkpoint", &ps::python::Checkpoint, py::kw_only(), py::arg("servers"), py::arg("etcd"),
        py::arg("cluster"), py::arg("full"), py::arg("timeout"), py::arg("token"),
        py::arg("ca_cert"), py::arg("cert"), py::arg("key"));
  m.def("tune_process_for_data_path", &ps::TuneProcessForDataPath);
}
