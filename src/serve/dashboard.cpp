#include "serve/dashboard.h"

#include "serve/dashboard_html.h"  // generated from dashboard.html: generated::kDashboardHtml

namespace dspark::serve {

std::string_view dashboard_html() { return generated::kDashboardHtml; }

}  // namespace dspark::serve
