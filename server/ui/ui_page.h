// The web UI's page (server/ui/index.html), compiled into the binaries that
// serve it (ps_server, ps_admin ui): nothing is read from disk or fetched.
#ifndef PS_SERVER_UI_UI_PAGE_H_
#define PS_SERVER_UI_UI_PAGE_H_

namespace ps {

const char* UiPageHtml();

}  // namespace ps

#endif  // PS_SERVER_UI_UI_PAGE_H_
